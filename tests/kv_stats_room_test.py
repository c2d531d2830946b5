#!/usr/bin/env python3
"""--kv-stats says how much room a budget leaves above the floor, and warns when it is less than
one fp16 window a layer.

A budget is a share of the fp16 cache and the floor a fixed number of tokens (sinks, recent
tokens, one growing window a layer), so on a short prompt a budget can sit just above it and
leave the policy nothing to select or recall with. On SmolLM2-135M-Instruct and the README's
500-token harbor document with its question (`qevict-recall`, 4 tokens generated):
- at 0.1 the budget is within one window a layer of the floor: the room line and its warning;
- at 0.3 there are several windows a layer of room: the room line, no warning;
- at 0.05 the budget is below the floor (infeasible): no room line.
The room printed is the budget less the floor, and the windows a layer that room over the fp16
bytes of one window of one layer as printed.

Usage: kv_stats_room_test.py build/qevict   (exit 77, skipped, without the reference model)
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
HEAD = re.compile(r"kv cache: qevict-recall, budget ([\d.]+) MiB, floor ([\d.]+) MiB")
ROOM = re.compile(r"room above the floor: ([\d.]+) MiB, ([\d.]+) fp16 windows a layer "
                  r"\(([\d.]+) KiB each\)")
WARNING = "less than one a layer"
FAILED = []


def fail(message):
    FAILED.append(message)
    print("FAIL " + message)


def stats(binary, prompt_file, budget):
    out = subprocess.run([binary, "run", "-m", MODEL, "-f", prompt_file, "--chat", "--temp", "0",
                          "-n", "4", "--kv-policy", "qevict-recall", "--kv-budget", str(budget),
                          "--kv-stats"], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        fail("budget %s: exit %d\n%s" % (budget, out.returncode, out.stderr[-1500:]))
    return out.stderr


def main():
    binary = os.path.abspath(sys.argv[1])
    if not os.path.exists(MODEL):
        print("reference model %s not found (make setup): skipped" % MODEL)
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        prompt_file = os.path.join(tmp, "harbor-question.txt")
        with open(os.path.join(ROOT, "data", "examples", "harbor.txt"), encoding="utf-8") as f:
            document = f.read()
        with open(prompt_file, "w", encoding="utf-8") as f:
            f.write(document + "What is the secret code?")
        for budget, warned in ((0.1, True), (0.3, False)):
            err = stats(binary, prompt_file, budget)
            head, room = HEAD.search(err), ROOM.search(err)
            if head is None or room is None:
                fail("budget %s: no budget/floor or room line in:\n%s" % (budget, err[-2000:]))
                continue
            budget_mib, floor_mib = float(head.group(1)), float(head.group(2))
            room_mib, windows, window_kib = (float(room.group(i)) for i in (1, 2, 3))
            if abs(room_mib - (budget_mib - floor_mib)) > 0.011:  # each printed to 0.01 MiB
                fail("budget %s: room %.2f MiB is not budget %.2f less floor %.2f"
                     % (budget, room_mib, budget_mib, floor_mib))
            if abs(window_kib - 6.0) > 0.05:
                fail("budget %s: a window of one layer is %.1f KiB, SmolLM2's is 6.0"
                     % (budget, window_kib))
            expected = room_mib * 1024 / 30 / window_kib
            if abs(windows - expected) > 0.1 + 0.02 * expected:
                fail("budget %s: %.1f windows a layer, the room gives %.2f"
                     % (budget, windows, expected))
            if (WARNING in err) != warned or (windows < 1.0) != warned:
                fail("budget %s: %.1f windows a layer, warning %s (expected %s)"
                     % (budget, windows, WARNING in err, warned))
        err = stats(binary, prompt_file, 0.05)
        if "INFEASIBLE" not in err or ROOM.search(err):
            fail("budget 0.05: expected INFEASIBLE and no room line in:\n%s" % err[-2000:])
    print("kv_stats_room: %d failures" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
