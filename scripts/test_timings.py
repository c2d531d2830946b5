#!/usr/bin/env python3
"""Where the time of a `make test` went: the stages, each CTest label, the slowest tests.

scripts/test.sh writes one line per stage (name, seconds, exit status) to STAGES and, for each
CTest run, a JUnit file (ctest --output-junit) with a JSON listing of the same build's tests
(ctest --show-only=json-v1) beside it, named RUN.junit.xml and RUN.tests.json. This prints:

  - every stage with its wall time and share of the whole;
  - for each CTest run, the tests' summed time per label (a test with several labels counts
    under each; the sums are CPU-side: ctest -j runs tests beside each other, so they can
    exceed the run's wall time);
  - the slowest tests of each run.

Usage: test_timings.py DIR... [--top N] [--markdown]
  DIR holds stages.tsv and the RUN.* files. --markdown prints the tables of docs/testing.md:
  each DIR's stages, then every test file with its entries' summed time in each run and the
  first sentence of the file's own comment (what it guards).
Only the standard library: it runs before and without the project's venv.
"""
import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET


def read_stages(path):
    stages = []
    if not os.path.exists(path):
        return stages
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3:
                stages.append((parts[0], float(parts[1]), parts[2]))
    return stages


def read_run(directory, run):
    """{test name: (seconds, status, [labels])} of one CTest run."""
    labels = {}
    listing = os.path.join(directory, run + ".tests.json")
    if os.path.exists(listing):
        with open(listing) as f:
            for test in json.load(f).get("tests", []):
                for prop in test.get("properties", []):
                    if prop.get("name") == "LABELS":
                        labels[test["name"]] = list(prop.get("value", []))
    tests = {}
    root = ET.parse(os.path.join(directory, run + ".junit.xml")).getroot()
    for case in root.iter("testcase"):
        name = case.get("name")
        tests[name] = (float(case.get("time") or 0.0), case.get("status") or "",
                       labels.get(name, ["(none)"]))
    return tests


RUN_ORDER = ["release", "asan-unit", "asan-model", "release-long", "asan-model-long", "arm"]


def run_order(name):
    return (RUN_ORDER.index(name) if name in RUN_ORDER else len(RUN_ORDER), name)


def runs_in(directory):
    """The CTest runs of DIR, in the order make test runs them."""
    return sorted((f[: -len(".junit.xml")] for f in os.listdir(directory)
                   if f.endswith(".junit.xml")), key=run_order)


def fmt_seconds(s):
    return "%dm%02ds" % (s // 60, s % 60) if s >= 60 else "%.1fs" % s


def print_summary(directory, top):
    stages = read_stages(os.path.join(directory, "stages.tsv"))
    total = sum(s for _, s, _ in stages)
    print("== where the time went (%s in all)" % fmt_seconds(total))
    for name, seconds, status in stages:
        share = 100.0 * seconds / total if total else 0.0
        mark = "" if status == "0" else "   <- exit %s" % status
        print("  %-28s %9s  %5.1f%%%s" % (name, fmt_seconds(seconds), share, mark))
    for run in runs_in(directory):
        tests = read_run(directory, run)
        per_label = {}
        for seconds, _, labels in tests.values():
            for label in labels:
                count, summed = per_label.get(label, (0, 0.0))
                per_label[label] = (count + 1, summed + seconds)
        print("== %s: %d tests, per label (summed test time)" % (run, len(tests)))
        for label, (count, summed) in sorted(per_label.items(), key=lambda kv: -kv[1][1]):
            print("  %-28s %4d tests %9s" % (label, count, fmt_seconds(summed)))
        print("  slowest:")
        for name, (seconds, status, _) in sorted(tests.items(), key=lambda kv: -kv[1][0])[:top]:
            print("    %9s  %s%s" % (fmt_seconds(seconds), name,
                                     "" if status in ("run", "") else " (%s)" % status))


SCRIPT_TESTS = {
    "cli_errors": "tests/cli_errors_test.sh",
    "cli_help": "tests/cli_help_test.py",
    "eval_render": "tests/eval_render_test.sh",
    "server_web_ui": "tests/server/test_web_ui.py",
}


def test_sources(root):
    """{gtest suite name: source file} from the TEST/TEST_F/TEST_P and INSTANTIATE lines."""
    import re
    pattern = re.compile(r"^\s*(?:TEST|TEST_F|TEST_P|TYPED_TEST)\(\s*(\w+)\s*,")
    sources = {}
    for top in ("src", "tests", "bench"):
        for base, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith("_test.cc"):
                    continue
                path = os.path.join(base, name)
                with open(path, errors="replace") as f:
                    for line in f:
                        m = pattern.match(line)
                        if m:
                            sources.setdefault(m.group(1), os.path.relpath(path, root))
    return sources


def source_of(test, sources):
    if test in SCRIPT_TESTS:
        return SCRIPT_TESTS[test]
    if test.startswith("server_http_"):
        return "tests/server/test_server.py --group %s" % test[len("server_http_"):]
    suite = test.split(".")[0].split("/")[-1]
    return sources.get(suite, "?")


SERVER_GROUPS = {
    "api": "The HTTP API as clients see it: requests, streaming, errors, disconnects, llama.cpp "
           "and OpenAI habits, admission control, the API key.",
    "kv": "Per-request KV policies and what the process keeps: the policy sweep, routed "
          "requests one after another, concurrent streaming load.",
    "sessions": "Conversations kept between requests: reuse, divergence, isolation, count, TTL "
                "and memory limits.",
    "soak": "Many rounds of mixed streaming load with kept conversations: nothing left behind, "
            "no memory growth.",
}


def guard_of(source, root):
    """The first sentence of the file's leading comment: what its tests guard."""
    if " --group " in source:
        return SERVER_GROUPS.get(source.split(" --group ")[1], "")
    path = os.path.join(root, source.split(" ")[0])
    if not os.path.exists(path):
        return ""
    text = []
    with open(path, errors="replace") as f:
        for line in f:
            stripped = line.strip()
            if stripped.startswith("#!") or (not text and not stripped):
                continue
            if stripped.startswith("//") or stripped.startswith("#"):
                body = stripped.lstrip("/#").strip()
                if body.startswith("include") or body.startswith("pragma"):
                    break
                text.append(body)
            elif stripped.startswith('"""'):
                text.append(stripped.strip('"'))
                if stripped.count('"""') == 1:
                    for more in f:
                        if '"""' in more or not more.strip():
                            break
                        text.append(more.strip())
                break
            else:
                break
    sentence = " ".join(t for t in text if t)
    end = sentence.find(". ")
    if end > 0:
        sentence = sentence[: end + 1]
    if len(sentence) > 180:
        sentence = sentence[:177].rsplit(" ", 1)[0] + " …"
    return sentence.replace("|", "/")


def print_markdown(directories, root, stages_only=False):
    """The tables of docs/testing.md: stages of each timing directory, then every test file
    with its entries' summed time in each CTest run."""
    runs = {}
    for directory in directories:
        stages = read_stages(os.path.join(directory, "stages.tsv"))
        total = sum(sec for _, sec, _ in stages)
        print("Stages (%s in all):" % fmt_seconds(total))
        print()
        print("| stage | wall time | exit |")
        print("|---|---:|---:|")
        for name, seconds, status in stages:
            print("| %s | %s | %s |" % (name, fmt_seconds(seconds), status))
        print()
        for run in runs_in(directory):
            runs[run] = read_run(directory, run)
    if stages_only:
        return
    sources = test_sources(root)
    names = sorted(runs, key=run_order)
    per_file = {}
    for run, tests in runs.items():
        for test, (seconds, _, labels) in tests.items():
            source = source_of(test, sources)
            entry = per_file.setdefault(source, {"labels": set(), "entries": set(), "runs": {}})
            entry["labels"].update(l for l in labels if l not in ("sanitized", "arm"))
            entry["entries"].add(test)
            entry["runs"][run] = entry["runs"].get(run, 0.0) + seconds
    print("Every CTest entry, by the file that holds it: how many entries, their summed time in "
          "each run (seconds; blank where the run does not have them), and what the file's own "
          "first comment says it guards.")
    print()
    print("| file | labels | entries | %s | guards |" % " | ".join(names))
    print("|---|---|---:|%s---|" % "".join("---:|" for _ in names))
    order = sorted(per_file.items(), key=lambda kv: -max(kv[1]["runs"].values()))
    for source, entry in order:
        cells = " | ".join("%.1f" % entry["runs"][n] if n in entry["runs"] else "" for n in names)
        print("| %s | %s | %d | %s | %s |" % (source, ",".join(sorted(entry["labels"])),
                                              len(entry["entries"]), cells,
                                              guard_of(source, root)))
    print()
    print("Entries in each run: %s." % ", ".join("%s %d" % (n, len(runs[n])) for n in names))
    print()
    print("<details><summary>Every entry with its time in each run (seconds)</summary>")
    print()
    print("| entry | file | %s |" % " | ".join(names))
    print("|---|---|%s" % "".join("---:|" for _ in names))
    every = sorted({t for tests in runs.values() for t in tests},
                   key=lambda t: -max(runs[n][t][0] if t in runs[n] else 0.0 for n in names))
    for test in every:
        cells = " | ".join("%.1f" % runs[n][test][0] if test in runs[n] else "" for n in names)
        print("| %s | %s | %s |" % (test.replace("|", "/"), source_of(test, sources), cells))
    print()
    print("</details>")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory", nargs="+")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--stages-only", action="store_true",
                        help="with --markdown: the stage tables alone")
    parser.add_argument("--marker", default="timings",
                        help="with --update-doc: the name in the markers (default timings)")
    parser.add_argument("--update-doc", metavar="FILE",
                        help="with --markdown: write the tables between FILE's "
                             "<!-- MARKER:begin --> and <!-- MARKER:end --> lines")
    args = parser.parse_args()
    for directory in args.directory:
        if not os.path.isdir(directory):
            print("test_timings: no such directory: %s" % directory, file=sys.stderr)
            return 1
    if args.markdown:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if not args.update_doc:
            print_markdown(args.directory, root, args.stages_only)
            return 0
        import contextlib
        import io
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            print_markdown(args.directory, root, args.stages_only)
        with open(args.update_doc) as f:
            text = f.read()
        begin = "<!-- %s:begin -->\n" % args.marker
        end = "<!-- %s:end -->" % args.marker
        if begin not in text or end not in text:
            print("test_timings: %s has no timings markers" % args.update_doc, file=sys.stderr)
            return 1
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1]
        with open(args.update_doc, "w") as f:
            f.write(head + begin + buffer.getvalue() + end + tail)
    else:
        for directory in args.directory:
            print_summary(directory, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
