#!/usr/bin/env bash
# Builds llama.cpp's llama-bench (the baseline `make bench` compares qevict against) and runs it.
#
#   scripts/bench_llamacpp.sh build          build if needed; print the llama-bench path
#   scripts/bench_llamacpp.sh path           print the llama-bench path (no build)
#   scripts/bench_llamacpp.sh flags          print the CMake flags used
#   scripts/bench_llamacpp.sh version        print "llama-cpp-python X"
#   scripts/bench_llamacpp.sh source         fetch and unpack the sdist if needed; print llama.cpp's dir
#   scripts/bench_llamacpp.sh [ARGS...]      build if needed, then run llama-bench ARGS...
#
# llama.cpp comes from the llama-cpp-python source distribution on PyPI (its vendor/llama.cpp),
# fetched with `pip download` into third_party_build/ (git-ignored); nothing from it is ever
# committed. The build is cached: re-runs cost nothing unless LLAMA_CPP_PYTHON_VERSION changes.
#
# Build configuration. On the reference machine (a sandboxed Xeon with AVX-512 and AMX) llama.cpp
# 0.3.36 built with GGML_NATIVE=ON was seen to crash (SIGSEGV) as soon as a batch had more than
# one token, while one-token batches worked: -march=native enables the AMX int8 path. We
# therefore build with GGML_NATIVE=OFF and name the instruction sets explicitly: AVX2/FMA/F16C,
# plus AVX-512 (F, BW, VL, DQ via GGML_AVX512, and VNNI) when the CPU has them -- the levels
# qevict's own kernels dispatch to -- with AMX and the extra BF16/VBMI paths off; batched
# prefill (llama-bench -p) runs correctly so built. LLAMA_CMAKE_EXTRA adds
# flags (e.g. LLAMA_CMAKE_EXTRA="-DGGML_AVX512=OFF" for an AVX2-only comparison).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
ROOT=${LLAMA_BUILD_ROOT:-third_party_build/llamacpp}
JOBS=${JOBS:-2}
SRC="$ROOT/llama_cpp_python-$VERSION"
BUILD="$ROOT/build-$VERSION"
BENCH="$BUILD/bin/llama-bench"

cpu_has() { grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -qx "$1"; }

cmake_flags() {
  local f=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF
           -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
           -DLLAMA_BUILD_TOOLS=ON -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
           -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
           -DGGML_AMX_BF16=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX512_VBMI=OFF)
  if cpu_has avx512f && cpu_has avx512bw && cpu_has avx512vl && cpu_has avx512dq; then
    f+=(-DGGML_AVX512=ON)
    if cpu_has avx512_vnni; then f+=(-DGGML_AVX512_VNNI=ON); else f+=(-DGGML_AVX512_VNNI=OFF); fi
  else
    f+=(-DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF)
  fi
  # shellcheck disable=SC2206
  f+=(${LLAMA_CMAKE_EXTRA:-})
  echo "${f[@]}"
}

fetch_source() {
  [ -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ] && return
  mkdir -p "$ROOT/dl"
  local sdist
  sdist=$(ls "$ROOT"/dl/llama[-_]cpp[-_]python-"$VERSION".tar.gz 2>/dev/null | head -1 || true)
  if [ -z "$sdist" ]; then
    echo "bench_llamacpp: downloading llama-cpp-python==$VERSION (source distribution)" >&2
    python3 -m pip download --quiet --no-deps --no-binary :all: \
      -d "$ROOT/dl" "llama-cpp-python==$VERSION" >&2
    sdist=$(ls "$ROOT"/dl/llama[-_]cpp[-_]python-"$VERSION".tar.gz | head -1)
  fi
  tar -xzf "$sdist" -C "$ROOT"
  [ -d "$SRC" ] || mv "$ROOT/llama-cpp-python-$VERSION" "$SRC"
  [ -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ] ||
    { echo "bench_llamacpp: $SRC has no vendor/llama.cpp" >&2; exit 1; }
}

build() {
  local flags stamp="$BUILD/.qevict-flags"
  flags=$(cmake_flags)
  if [ -x "$BENCH" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$flags" ]; then return; fi
  fetch_source
  echo "bench_llamacpp: building llama-bench (-j$JOBS): $flags" >&2
  # shellcheck disable=SC2086
  cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" $flags >"$ROOT/cmake-configure.log" 2>&1 ||
    { tail -30 "$ROOT/cmake-configure.log" >&2; exit 1; }
  cmake --build "$BUILD" --target llama-bench -j"$JOBS" >"$ROOT/cmake-build.log" 2>&1 ||
    { tail -30 "$ROOT/cmake-build.log" >&2; exit 1; }
  echo "$flags" >"$stamp"
}

case "${1:-}" in
  build) build; echo "$BENCH" ;;
  path) echo "$BENCH" ;;
  flags) cmake_flags ;;
  version) echo "llama-cpp-python $VERSION" ;;
  source) fetch_source; echo "$SRC/vendor/llama.cpp" ;;
  *) build; exec "$BENCH" "$@" ;;
esac
