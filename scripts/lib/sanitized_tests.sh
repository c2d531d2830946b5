# Sourced by scripts/test_sanitized.sh (make test) and scripts/test_long.sh (make test-long):
# the sanitizers' options and which model-level tests `make test` runs sanitized (the rest of
# the `model` label runs sanitized in `make test-long`).

# A report fails the test at once; an allocation that cannot be met returns null (the parsers'
# size checks are tested that way).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# The model-level tests that feed the engine what comes from outside: the fuzz regressions
# (kept findings, seed corpora, GGUF fixtures), the prompt-cache loaders (truncated, corrupt and
# altered files), the public API, the prompt builders, the CLI's error paths, and the HTTP
# server's `api` group (requests, streaming, errors, disconnects, admission, the API key).
SANITIZED_IN_MAKE_TEST='^(FuzzRegressionTest|PromptCacheFileTest|PublicApiTest|PromptStyleModelTest)\.|^(cli_errors|server_http_api)$'

# The build-asan stage (scripts/lib/timing.sh's `stage`): the ASan+UBSan tree, configured and
# built with JOBS jobs.
build_sanitized_tree() {
  stage build-asan bash -c "scripts/configure.sh build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQEVICT_SANITIZE=ON &&
                            cmake --build build-asan -j$JOBS"
}
