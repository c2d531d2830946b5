#!/usr/bin/env bash
# Configures a CMake build tree the way every script of the project does:
#   scripts/configure.sh DIR [cmake options...]
# A new tree uses Ninja (when installed: one scheduler for the whole build, a log of each
# step's time in DIR/.ninja_log) and ccache as the compiler launcher (when installed). ccache
# keys each object on the compiler's own bytes (compiler_check=content, not its timestamp), its
# flags and the preprocessed source with every header it includes, so a cached object is reused
# only for exactly the same input: a stale cache cannot hide a broken build. Paths under the
# source tree are hashed relative to it (base_dir; the tree's own path is in one generated
# header only, cmake/source_dir.h.in), so clones and worktrees share objects. QEVICT_CCACHE=0
# turns it off. An existing tree keeps the generator it was made with.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=$1
shift
args=()
if [ ! -f "$DIR/CMakeCache.txt" ] && command -v ninja >/dev/null; then
  args+=(-G Ninja)
fi
if [ "${QEVICT_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  launcher="env;CCACHE_COMPILERCHECK=content;CCACHE_BASEDIR=$PWD;CCACHE_NOHASHDIR=true;ccache"
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_C_COMPILER_LAUNCHER="$launcher")
else
  args+=(-UCMAKE_CXX_COMPILER_LAUNCHER -UCMAKE_C_COMPILER_LAUNCHER)
fi
cmake -S . -B "$DIR" "${args[@]}" "$@" >/dev/null
