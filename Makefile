# qevict: the two commands that do everything on a fresh machine are `make demo` and `make test`.
JOBS ?= $(shell nproc)
BUILD ?= build
MODEL ?= models/SmolLM2-135M-Instruct.Q4_1.gguf
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all setup build test test-unit test-long test-asan test-arm demo eval eval-extra eval-long eval-qa eval-recall eval-recall-gemma eval-quick results rescore bench bench-kv bench-gemma clean format fuzz

all: build

setup:
	@scripts/setup.sh all

# Ninja and ccache where installed (scripts/configure.sh; scripts/setup.sh installs both).
$(BUILD)/CMakeCache.txt:
	scripts/configure.sh $(BUILD) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# Setup, the Release build and its whole suite (unit, model, server), the unit tests and the
# parsers of outside input under ASan+UBSan, the core libraries cross-built for ARM (tests under
# qemu where it can run them); where the time went is printed at the end (scripts/test.sh).
# Under 30 minutes on a fresh 2-core machine; docs/testing.md has every entry's duration.
test:
	@BUILD=$(BUILD) JOBS=$(JOBS) scripts/test.sh

# The loop while working: the tests that need no model, in about a minute.
test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -L unit

# What does not fit in `make test`: run it before a submission that touches what it covers
# (docs/testing.md says what and how long).
test-long: setup build
	@BUILD=$(BUILD) JOBS=$(JOBS) scripts/test_long.sh

test-asan:
	@scripts/test_sanitized.sh

test-arm:
	@scripts/test_arm.sh

demo: setup build
	@scripts/demo.sh

# The published evaluation grid on both reference models up to 8k tokens (16k, 32k: eval-long): rows
# committed under docs/results/runs/, docs/results.md regenerated from them.
eval: setup build
	@scripts/eval.sh

# The headline cells of Gemma 3 270M at 16k and 32k tokens (needles and drift; about 4.5 hours),
# each run in 4 shards (SHARDS_LONG) resumed where an interrupted one stopped; COMMIT_SHARDS=1
# commits each shard's rows as it finishes (scripts/eval.sh).
eval-long: setup build
	@PART=long scripts/eval.sh

# The reported families beside the headline (SCBench-style, RULER-style, ppl, ablations).
eval-extra: setup build
	@PART=extra scripts/eval.sh

# Issue 20's score sources in both protocols on SmolLM2 (rows under docs/results-qa/runs/,
# docs/results-query-agnostic-test.md regenerated; about 1 h 30 min on 2 cores).
eval-qa: setup build
	@PART=qa scripts/eval.sh

# Issue 38's cold tier and recall in the context-only protocol: docs/results-recall.md.
eval-recall: setup build
	@SHARDS=$${SHARDS:-3} COMMIT_SHARDS=$${COMMIT_SHARDS:-1} PART=recall scripts/eval.sh
# The same on Gemma 3 270M at 8k and 16k tokens, budgets of its global layers (about 70 min).
eval-recall-gemma: setup build
	@SHARDS=$${SHARDS:-2} COMMIT_SHARDS=$${COMMIT_SHARDS:-1} PART=recall-gemma scripts/eval.sh

# The headline table with 95% intervals (30 instances a cell) in about 15 minutes.
eval-quick: setup build
	@QUICK=1 scripts/eval.sh

# docs/results.md re-rendered from the committed rows (under a minute).
results: build
	@scripts/render_results.sh

# The committed rows scored again with this build's scorer (no model run), then the pages.
rescore: build
	@python3 scripts/rescore_runs.py
	@scripts/render_results.sh

bench: setup build
	@scripts/bench.sh

# The cache's tables alone (KV-cache policies with the follow-up from the disk, memory), spliced
# into docs/benchmarks.md with their own date; no llama.cpp build, about 15 min on 2 cores.
bench-kv: setup build
	@STAGES=kv,memory,cold scripts/bench.sh

# qevict vs llama.cpp on Gemma 3 270M (Q4_K/Q5_0/Q6_K/Q8_0 weights, sliding-window layers), and
# the KV policies at 32k tokens with budgets of the global layers' cache (issue 38's decode
# target: qevict-recall at 0.05 against the full cache; about 12 min more, a 32k prefill a row).
bench-gemma: setup build
	@MODEL=models/gemma-3-270m-q4_k_m.gguf OUT=docs/benchmarks-gemma.md STAGES=speed,kv \
	  CTX=512,4096,8192,16384 ROUNDS=1 PROFILE=0 KV_CTX=32000 KV_SCOPE=global \
	  KV_POLICIES=qevict,snapkv,qevict-recall KV_BUDGETS=0.05,0.1 KV_ROUNDS=2 scripts/bench.sh

# libFuzzer targets with ASan+UBSan, FUZZ_SECONDS (default 180) each; see docs/security.md.
fuzz:
	@scripts/fuzz.sh

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) build-asan build-arm
