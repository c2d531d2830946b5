#!/usr/bin/env python3
"""README.md's examples run as written and answer sensibly.

Every line of README.md's code blocks that is a command of the reference model
(models/SmolLM2-135M-Instruct.Q4_1.gguf), and the shell lines of the same block before it, runs
from the repository root with `build/qevict` replaced by the binary under test; each must exit
0, and where the README's prose promises an answer the output must hold it: the capital of
France is Paris, the harbor document's secret code is 4172, and --kv-stats reads the prompt's
peak as bounded prefill's, never as "OVER BUDGET". Two kinds of command are not run, for a
stated reason: `serve` runs until it is stopped (tests/server drives it), and `eval` grids take
minutes (tests/eval_run_test.cc and the eval_render test run small ones).

Usage: readme_examples_test.py build/qevict   (exit 77, skipped, without the reference model)
"""
import os
import re
import shutil
import subprocess
import tempfile
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
NOT_RUN = {"serve": "runs until stopped; tests/server covers it",
           "eval": "a grid of minutes; the eval tests run small ones"}
FAILED = []


def fail(message):
    FAILED.append(message)
    print("FAIL " + message)


def code_blocks(text):
    return re.findall(r"^```\n(.*?)^```", text, flags=re.S | re.M)


def expected_answer(line):
    """What the command's stdout must hold, by what it asks."""
    if "build/qevict" not in line:
        return None  # a shell line preparing a file
    if "capital of France" in line:
        return "Paris"
    if "-n 0" in line:
        return None  # reads a document, generates nothing
    if "harbor-question.txt" in line or ("chat" in line and ("harbor.txt" in line or
                                                              "harbor.qpc" in line)):
        return "4172"
    return None


def main():
    binary = os.path.abspath(sys.argv[1])
    if not os.path.exists(os.path.join(ROOT, MODEL)):
        print("reference model %s not found (make setup): skipped" % MODEL)
        return 77
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        blocks = [b for b in code_blocks(f.read()) if MODEL in b]
    # The examples' /tmp files go to a directory of this run: a file left by an earlier run (or by
    # an older binary, whose prompt cache this one would rightly refuse) cannot change the result.
    scratch = tempfile.mkdtemp(prefix="qevict-readme-")
    ran = 0
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():  # continuation lines joined
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            command = re.search(r"build/qevict\s+(\w+)", line)
            if command and command.group(1) in NOT_RUN:
                print("not run (%s): %s" % (NOT_RUN[command.group(1)], line[:100]))
                continue
            # /tmp/ first: the binary under test may itself live under /tmp (a clone there).
            shell = line.replace("/tmp/", scratch + "/").replace("build/qevict", binary)
            out = subprocess.run(["bash", "-c", shell], cwd=ROOT, capture_output=True,
                                 text=True, timeout=300)
            ran += 1
            if out.returncode != 0:
                fail("exit %d: %s\n%s" % (out.returncode, line, out.stderr[-1500:]))
                continue
            want = expected_answer(line)
            if want is not None and want not in out.stdout:
                fail("%s\n  stdout lacks %r: %r" % (line, want, out.stdout[-500:]))
            if "--kv-stats" in line:
                if "OVER BUDGET" in out.stderr:
                    fail("%s\n  --kv-stats says OVER BUDGET:\n%s" % (line, out.stderr[-1500:]))
                for figure in ("kv cache: ", "floor: the least any budget leaves",
                               "while the prompt was read", "summed over the 30 layers"):
                    if figure not in out.stderr:
                        fail("%s\n  --kv-stats lacks %r:\n%s" % (line, figure,
                                                                 out.stderr[-1500:]))
            if command and command.group(1) == "chat" and "\n---\n" not in out.stdout:
                fail("%s\n  chat's answer is not ended by a line '---': %r" % (line, out.stdout))
            cache_file = "'%s/harbor.qpc'" % scratch
            if "--prompt-cache-ro" in line and ("read from " + cache_file not in out.stderr and
                                                "from the prompt cache " + cache_file
                                                not in out.stderr):
                fail("%s\n  the prompt cache was not read:\n%s" % (line, out.stderr[-1500:]))
            print("ok: %s" % line[:110])
    if ran < 6:
        fail("only %d README commands ran (the examples moved?)" % ran)
    print("%d ran, %d failed" % (ran, len(FAILED)))
    shutil.rmtree(scratch, ignore_errors=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
