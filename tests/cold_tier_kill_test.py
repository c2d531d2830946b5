#!/usr/bin/env python3
"""A killed run leaves nothing on disk (docs/kv-cache.md, "Cold tier and recall", Faults).

`qevict run` with qevict-recall, a small budget and a fresh --kv-cold-dir on three of
data/haystack's texts (about 4k tokens, read in 512-token chunks, each chunk's end routing the
cache: windows go cold while most of the prompt is still to be read): once its cold file holds
blocks (seen through /proc/PID/fd: an open "(deleted)" file in that directory with a size above
zero), the directory has no entry; after SIGKILL it still has none. Exits 77 (skipped) without
the model.

Usage: cold_tier_kill_test.py BINARY
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.environ.get("QEVICT_MODEL",
                       os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))


def cold_files(pid, directory):
    """The files the process holds open in `directory` that are unlinked: (fd, size)."""
    found = []
    fd_dir = "/proc/%d/fd" % pid
    try:
        fds = os.listdir(fd_dir)
    except FileNotFoundError:
        return found
    for fd in fds:
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
            if target.startswith(directory + "/") and target.endswith(" (deleted)"):
                found.append((int(fd), os.stat(os.path.join(fd_dir, fd)).st_size))
        except OSError:  # closed meanwhile
            continue
    return found


def main():
    binary = sys.argv[1]
    if not os.path.isfile(MODEL):
        print("skipped: no model at %s (scripts/setup.sh model)" % MODEL)
        return 77
    with tempfile.TemporaryDirectory(prefix="qevict-cold-kill-") as cold, \
            tempfile.NamedTemporaryFile("w", suffix=".txt") as prompt:
        for name in ("animals_and_neighbors", "crafts_and_customs", "home_and_garden"):
            with open(os.path.join(ROOT, "data", "haystack", name + ".txt")) as text:
                prompt.write(text.read())
        prompt.flush()
        # One thread: the prefill after the first cold blocks lasts seconds, and the run is
        # killed as soon as they are seen.
        proc = subprocess.Popen(
            [binary, "run", "-m", MODEL, "-f", prompt.name, "--temp", "0", "-n", "8", "-t", "1",
             "--kv-policy", "qevict-recall", "--kv-budget", "0.1", "--kv-prefill-chunk", "512",
             "--kv-cold-dir", cold],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        seen = []
        deadline = time.time() + 120
        try:
            while time.time() < deadline and proc.poll() is None:
                seen = [f for f in cold_files(proc.pid, cold) if f[1] > 0]
                if seen:
                    break
                time.sleep(0.005)
            entries_while_running = os.listdir(cold)
            running = proc.poll() is None
        finally:
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate(timeout=60)
        if not running:
            print("FAIL: the run ended (exit %s) before its cold file held a block: %s"
                  % (proc.returncode, err.decode(errors="replace")[-2000:]))
            return 1
        if not seen:
            print("FAIL: no cold file with blocks seen under %s within 120 s" % cold)
            return 1
        if entries_while_running:
            print("FAIL: %s holds %s while the run uses its cold file" % (cold, entries_while_running))
            return 1
        entries_after_kill = os.listdir(cold)
        if entries_after_kill:
            print("FAIL: %s holds %s after SIGKILL" % (cold, entries_after_kill))
            return 1
        print("ok: cold file fd %d held %d bytes, unlinked; the directory was empty while the run "
              "used it and after SIGKILL" % seen[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
