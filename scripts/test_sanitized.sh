#!/usr/bin/env bash
# Builds the tests with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and runs
# them (all but those labelled `slow`). Any report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQEVICT_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$JOBS"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Every unit test runs sanitized: the libraries' own suites (GGUF and tokenizer parsing, kernels
# against references, caches, policies, the server's and the evaluator's logic on synthetic
# input). Of the model-level tests, those that feed the engine what comes from outside run too:
# the fuzz regressions (kept findings, seed corpora, GGUF fixtures), the prompt-cache loaders
# (truncated, corrupt and altered files), the public API, the prompt builders, the CLI's error
# paths and the HTTP server (its short sanitized form: requests, errors, disconnects, admission,
# sessions). The other model-level tests (goldens, policy sweeps, forks, memory, eval runs) repeat
# forward passes through code the above already runs, at 5-10x the Release cost under ASan; they
# run in the Release suite. On a 2-core machine this stage took over an hour with them.
cd build-asan
ctest --output-on-failure -j"$JOBS" --timeout 1200 -LE model
ctest --output-on-failure -j"$JOBS" --timeout 2400 -L model \
  -R "^(FuzzRegressionTest|PromptCacheFileTest|PublicApiTest|PromptStyleModelTest)\\.|^(cli_errors|server_http_.*)$"
