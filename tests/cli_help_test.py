#!/usr/bin/env python3
"""Every flag a subcommand's --help lists is accepted by that subcommand, and the defaults --help
prints agree with the ones the docs state.

For each subcommand, each listed option is passed (with its printed default, or a sample value)
together with a model path that does not exist: the command must fail after parsing (exit 1,
qevict's own error about the model), never on the command line (a parse error: "qevict: error: ...;
see 'qevict SUB --help' for the options", also exit 1).
Then the defaults of the --kv-* options are compared with docs/kv-cache.md's options table, and
the sampling defaults with README.md and docs/server.md.

Usage: cli_help_test.py build/qevict
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBCOMMANDS = ["run", "chat", "info", "bench", "serve", "eval", "report"]
# A value for options whose --help shows no default (CLI11 prints TYPE only).
SAMPLES = {"INT": "1", "UINT": "1", "FLOAT": "0.5", "TEXT": "x"}
# Values that must be of a particular form for the parse (not the run) to succeed.
SPECIAL = {"--shard": "0/1", "--prefill-mode": "bounded", "--prompt-style": "auto",
           "--perf-phase": "decode", "--kv-ratio": "0.9", "--kv-budget-bytes": "64m",
           "--kv-cold-disk-limit": "1g",
           "--kv-memory-limit": "512m", "--max-body": "1m", "-o": "/nonexistent-out",
           "--out": "/nonexistent-out", "--ctx": "512", "--policies": "qevict",
           "--tasks": "niah"}
# Flags that only parse beside another one (CLI11's needs()).
NEEDS = {"--prompt-cache-all": ["--prompt-cache", "x"], "--prompt-cache-ro": ["--prompt-cache", "x"]}
FAILED = []


def fail(msg):
    FAILED.append(msg)
    print("FAIL " + msg)


def help_options(binary, sub):
    out = subprocess.run([binary, sub, "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    options = []
    for line in out.stdout.splitlines():
        m = re.match(r"^\s+((?:-\w,)?--[\w-]+(?:,--[\w-]+)*)(?:\s+([A-Z]+)(?=[\s:\[=]|$)(?:[:\[][^=\s]*)?(?:=(\S+))?)?",
                     line)
        if not m:
            continue
        names = m.group(1).split(",")
        if "--help" in names:
            continue
        options.append((names, m.group(2), m.group(3)))
    return options, out.stdout


def check_accepted(binary, sub, names, kind, default):
    for name in names:
        args = [binary, sub]
        args += ["/nonexistent.jsonl"] if sub == "report" else ["-m", "/nonexistent.gguf"]
        if name in ("-m", "--model"):
            continue
        args += NEEDS.get(name, [])
        if kind is None:
            args.append(name)
        else:
            value = SPECIAL.get(name, SPECIAL.get(names[-1]))
            if value is None:
                value = default.strip("[]").split(",")[0] if default else SAMPLES.get(kind, "1")
            args += [name, value]
        out = subprocess.run(args, capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
        # Exit 1 with qevict's own error: the command line parsed, the run failed later (on the
        # model, or on another missing input). A parse error is exit 1 too, and points at --help.
        if (out.returncode != 1 or "--help' for the options" in out.stderr
                or not out.stderr.startswith("qevict: ")):
            fail("%s %s: not accepted (exit %d): %s" % (sub, " ".join(args[4:] if sub != "report"
                                                                   else args[3:]),
                                                        out.returncode, out.stderr.strip()[:300]))


def doc_table_defaults(path):
    """`--flag` -> default from a markdown table `| `--flag` | default | ... |`."""
    out = {}
    with open(os.path.join(ROOT, path)) as f:
        for line in f:
            m = re.match(r"^\| `(--[\w-]+)` \| ([^|]+) \|", line)
            if m:
                out[m.group(1)] = m.group(2).strip().strip("`")
    return out


def same_value(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def main():
    binary = sys.argv[1]
    printed = {}
    for sub in SUBCOMMANDS:
        options, _ = help_options(binary, sub)
        if not options:
            fail("%s --help lists no options" % sub)
        for names, kind, default in options:
            check_accepted(binary, sub, names, kind, default)
            for name in names:
                printed.setdefault(sub, {})[name] = default

    # docs/kv-cache.md's options table against `run --help`.
    documented = doc_table_defaults("docs/kv-cache.md")
    checked = 0
    for flag, doc_default in documented.items():
        if flag not in printed["run"]:
            if flag != "--kv-stats":
                fail("docs/kv-cache.md documents %s, which `run --help` does not list" % flag)
            continue
        shown = printed["run"][flag]
        if shown is None or doc_default in ("—", "-"):
            continue
        checked += 1
        if not same_value(shown, doc_default):
            fail("%s: --help says %s, docs/kv-cache.md says %s" % (flag, shown, doc_default))
    if checked < 10:
        fail("only %d defaults compared with docs/kv-cache.md" % checked)

    # Sampling defaults: the flags of run and chat, and what README.md and docs/server.md state.
    want = {"--temp": "0.8", "--top-k": "40", "--top-p": "0.95", "--min-p": "0.05",
            "--seed": "42"}
    for sub in ("run", "chat"):
        for flag, value in want.items():
            if not same_value(printed[sub].get(flag) or "", value):
                fail("%s %s: --help says %s, the documented default is %s"
                     % (sub, flag, printed[sub].get(flag), value))
    readme = open(os.path.join(ROOT, "README.md")).read()
    server = open(os.path.join(ROOT, "docs/server.md")).read()
    for text, where in ((readme, "README.md"), (server, "docs/server.md")):
        if not re.search(r"temperature 0\.8,\s+top-k 40,\s+top-p 0\.95,\s+min-p 0\.05", text):
            fail("%s does not state the sampling defaults (temperature 0.8, top-k 40, top-p "
                 "0.95, min-p 0.05)" % where)
    for field, value in (("temperature", "0.8"), ("top_p", "0.95"), ("top_k", "40"),
                         ("min_p", "0.05")):
        if not re.search(r"\| `%s` \|[^|]*default %s" % (field, re.escape(value)), server):
            fail("docs/server.md's request-field table does not give %s default %s"
                 % (field, value))
    # Links inside the docs point inside the repository.
    for doc in ["README.md"] + ["docs/" + f for f in os.listdir(os.path.join(ROOT, "docs"))
                                if f.endswith(".md")]:
        text = open(os.path.join(ROOT, doc)).read()
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if re.match(r"^[a-z]+://", target):
                continue
            path = os.path.normpath(os.path.join(ROOT, os.path.dirname(doc), target))
            if not path.startswith(ROOT + os.sep) or not os.path.exists(path):
                fail("%s links to %s, which is not a file of the repository" % (doc, target))
    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
