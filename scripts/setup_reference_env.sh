#!/usr/bin/env bash
# Creates the Python environment that scripts/gen_arch_golden.py (the per-architecture golden
# logits in tests/golden/arch/) runs in: .venv-ref (git-ignored) with torch (CPU use only),
# transformers, safetensors, sentencepiece, numpy, protobuf and llama.cpp's gguf-py.
#
#   scripts/setup_reference_env.sh          create / complete .venv-ref (idempotent)
#   scripts/setup_reference_env.sh path     print the venv's python
#
# llama.cpp (its convert_hf_to_gguf.py and gguf-py) comes from the llama-cpp-python source
# distribution on PyPI (vendor/llama.cpp), fetched the same way scripts/bench_llamacpp.sh does
# into third_party_build/ (git-ignored); nothing from it is ever copied into the repo.
#
# Only PyPI and Debian are reachable, so torch is PyPI's default Linux wheel (the CUDA build,
# which pulls the nvidia-* runtime wheels, a few GB); it is only ever run on the CPU.
# The versions follow llama.cpp's own requirements/requirements-convert_hf_to_gguf.txt of the
# vendored source (torch 2.11.0, transformers 4.57.6) so that its converter runs as upstream
# tests it. Override with TORCH_SPEC / TRANSFORMERS_SPEC.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
ROOT=${LLAMA_BUILD_ROOT:-third_party_build/llamacpp}
SRC="$ROOT/llama_cpp_python-$VERSION"
LLAMA="$SRC/vendor/llama.cpp"
VENV=${VENV_REF:-.venv-ref}
PY="$VENV/bin/python"
TORCH_SPEC=${TORCH_SPEC:-torch==2.11.0}
TRANSFORMERS_SPEC=${TRANSFORMERS_SPEC:-transformers==4.57.6}

if [ "${1:-}" = path ]; then echo "$PY"; exit 0; fi

# The llama.cpp source inside the llama-cpp-python sdist, fetched the one way the project does.
fetch_source() {
  [ -f "$LLAMA/convert_hf_to_gguf.py" ] && return
  LLAMA_CPP_PYTHON_VERSION=$VERSION scripts/bench_llamacpp.sh source >/dev/null
  [ -f "$LLAMA/convert_hf_to_gguf.py" ] ||
    { echo "setup_reference_env: $LLAMA has no convert_hf_to_gguf.py" >&2; exit 1; }
}

fetch_source

stamp="$VENV/.qevict-ref-stamp"
want="$VERSION $TORCH_SPEC $TRANSFORMERS_SPEC"
if [ -x "$PY" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "setup_reference_env: $VENV is up to date ($want)" >&2
  exit 0
fi

[ -x "$PY" ] || python3 -m venv "$VENV"
"$PY" -m pip install --quiet --upgrade pip >&2
echo "setup_reference_env: installing $TORCH_SPEC $TRANSFORMERS_SPEC ... into $VENV" >&2
# What convert_hf_to_gguf.py (and its conversion/ package) imports: torch, numpy, sentencepiece,
# safetensors, transformers (+ huggingface_hub), protobuf (sentencepiece model parsing), and
# gguf-py's own dependencies (tqdm, pyyaml, requests). mistral_common is optional there.
"$PY" -m pip install "$TORCH_SPEC" "$TRANSFORMERS_SPEC" safetensors "sentencepiece>=0.1.98,<0.3.0" \
  "numpy>=2.2.6" "protobuf>=4.21.0,<5.0.0" tqdm pyyaml requests >&2
# gguf-py from the vendored llama.cpp (not PyPI's gguf, which may lag the converter).
"$PY" -m pip install --quiet "$LLAMA/gguf-py" >&2
"$PY" -c 'import torch, transformers, gguf, sentencepiece, safetensors, numpy
print("setup_reference_env: torch", torch.__version__, "transformers", transformers.__version__,
      "gguf", getattr(gguf, "__version__", "?"))' >&2
echo "$want" >"$stamp"
