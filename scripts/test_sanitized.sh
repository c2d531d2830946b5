#!/usr/bin/env bash
# `make test-asan` (and the sanitized stages of `make test`): builds the tests with
# AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and runs them. Any report fails
# the run.
#
# Every unit test runs sanitized: the libraries' own suites (GGUF and tokenizer parsing, kernels
# against references, caches, policies, the server's and the evaluator's logic on synthetic
# input). Of the model-level tests, those that feed the engine what comes from outside run too
# (scripts/lib/sanitized_tests.sh names them): the fuzz regressions, the prompt-cache loaders,
# the public API, the prompt builders, the CLI's error paths and the HTTP server's `api` group
# (requests, streaming, errors, disconnects, admission, the API key). The other model-level
# tests (goldens, policy sweeps, forks, memory, eval runs, the server's kv and sessions groups)
# repeat forward passes through code the above already runs, at 5-10x the Release cost under
# ASan: they run sanitized in `make test-long` (docs/testing.md has the durations).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
# shellcheck source=scripts/lib/timing.sh
. scripts/lib/timing.sh
# shellcheck source=scripts/lib/sanitized_tests.sh
. scripts/lib/sanitized_tests.sh

build_sanitized_tree
stage test-asan-unit ctest_run asan-unit build-asan -j"$JOBS" --timeout 1200 -LE "model|long"
stage test-asan-model ctest_run asan-model build-asan -j"$JOBS" --timeout 2400 -L model -R "$SANITIZED_IN_MAKE_TEST"
