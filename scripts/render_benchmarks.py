#!/usr/bin/env python3
"""Renders docs/benchmarks.md from the raw results scripts/bench.sh collected (standard library
only). Every number and every verdict in the output is computed here from those files; the page
is never edited by hand.

Inputs in --work:
  meta.json                    machine, date, settings (written by bench.sh)
  speed_r{R}_L{L}.json         `qevict bench --json`, round R, context L
  llama_pp_r{R}_L{L}.json      llama-bench -o json, prefill of the same prompt length
  llama_tg_r{R}_L{L}.json      llama-bench -o json, decode at depth = that prompt length
  llama_{pp,tg}_*.rss          peak RSS of those llama-bench runs (KiB, GNU time)
  kv_{policy}_{budget}_L{L}.json, kvfail_{policy}_{budget}_L{L}.txt
  profile_{decode,prefill}_L{L}.txt   `perf report --stdio --no-children --sort symbol`
"""
import argparse
import glob
import json
import os
import re
import statistics

# The speed issue's targets, per context: decode and prefill as multiples of llama.cpp's, decode
# as a share of the bandwidth limit (None: no target there). Beyond the last context, the decode
# ratio must not fall below the one at TARGET_CTX[-1]. KV_TARGET: a compressing policy's decode
# as a share of its own bandwidth limit (weights + the KV it holds) at one budget and context.
TARGETS = {512: {"decode": 1.5, "prefill": None, "bw": None},
           4096: {"decode": 1.5, "prefill": 2.5, "bw": 0.6}}
TARGET_CTX = tuple(sorted(TARGETS))
KV_TARGET = {"policy": "qevict", "budget": "0.05", "ctx": 8192, "share": 0.7}

# Profile symbols grouped by what they do; the first matching rule wins.
CATEGORIES = [
    ("kernel (page faults, syscalls, scheduler)", r"^\[k\]"),
    # The pool's own loops; work run through ParallelFor<...> lambdas falls to the rules below.
    ("thread-pool synchronisation and spin-waiting",
     r"ThreadPool::(Run|Work|WorkerLoop|RunOnAll)\b|futex|sched_yield|pthread_"),
    ("activation quantization (fp32 -> Q8)", r"[Qq]uantize"),
    ("attention (scores, softmax, weighted values)",
     r"[Aa]ttention|Attend|Score|Accumulate|[Ss]oftmax|MaxOf|ExpShift|expf"),
    ("KV store (RoPE on keys, fp32 -> fp16)", r"Store|Fp32ToFp16|[Rr]ope"),
    ("quantized matmul (weights x activations)",
     r"[Vv]ec_?[Dd]ot|MatMul|[Tt]ile|Dot|[Gg]emv|[Gg]emm"),
    ("norms, SwiGLU, residual adds, embedding", r"[Nn]orm|Silu|SwiGLU|Swiglu|Add|Mul|Embed|Gelu"),
    ("memory copies (memcpy, memset)", r"mem(cpy|set|move)"),
]


def load_json(path):
    with open(path) as f:
        return json.load(f)


def try_load(path):
    """The JSON in path, or None when the file is empty or cut short (a run that failed)."""
    try:
        return load_json(path)
    except (OSError, ValueError):
        return None


def ctx_of(path):
    return int(re.search(r"_L(\d+)\.", path).group(1))


def mib(b):
    return "%.1f MiB" % (b / 2**20)


def fmt(x, digits=1):
    return "n/a" if x is None else ("%." + str(digits) + "f") % x


def pct(x):
    return "n/a" if x is None else "%.0f%%" % x


def ratio_str(a, b):
    return "n/a" if a is None or not b else "%.2fx" % (a / b)


def read_timed(path):
    """(peak RSS bytes, CPU % obtained, idle fraction before) from a bench.sh run_timed file."""
    rss = cpu = idle = None
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return rss, cpu, idle
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("idle_before", "load_before"):
            if parts[0] == "idle_before":
                idle = float(parts[1])
        elif len(parts) == 2 and parts[1].endswith("%") and parts[0].isdigit():
            rss = int(parts[0]) * 1024 or None
            cpu = float(parts[1][:-1] or 0) or None
    return rss, cpu, idle


def median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def collect_speed(work, ours="speed", theirs="llama"):
    """Per context: our best rows / samples and llama.cpp's, over all rounds."""
    out = {}
    for path in sorted(glob.glob(os.path.join(work, ours + "_r*_L*.json"))):
        L = ctx_of(path)
        j = try_load(path)
        if not j or not j.get("rows"):
            continue
        e = out.setdefault(L, {"ours": [], "bw": [], "ws_bw": [], "llama_pp": [], "llama_tg": [],
                               "llama_rss": [], "cpu": [], "l_cpu": [], "idle": [], "meta": j})
        e["ours"].append(j["rows"][0])
        e["bw"].append(j["bandwidth_gbs"])
        e["ws_bw"].append(j["working_set_bandwidth_gbs"])
        tag = os.path.basename(path)[len(ours) + 1:-len(".json")]
        _, cpu, idle = read_timed(os.path.join(work, "%s_%s.rss" % (ours, tag)))
        e["cpu"].append(cpu)
        e["idle"].append(idle)
        for kind in ("pp", "tg"):
            lp = os.path.join(work, "%s_%s_%s.json" % (theirs, kind, tag))
            tests = try_load(lp)
            if tests:
                e["llama_" + kind].append(tests[0])
            rss, cpu, idle = read_timed(os.path.join(work, "%s_%s_%s.rss" % (theirs, kind, tag)))
            if rss:
                e["llama_rss"].append(rss)
            e["l_cpu"].append(cpu)
            e["idle"].append(idle)
    return out


def summarize(e):
    ours = e["ours"]
    s = {
        "prompt_tokens": ours[0]["prompt_tokens"],
        "prefill": max(r["prefill_tps"] for r in ours),
        "decode": max(r["decode_tps"] for r in ours),
        "prefill_med": statistics.median(x for r in ours for x in r["prefill_tps_samples"]),
        "decode_med": statistics.median(x for r in ours for x in r["decode_tps_samples"]),
        "bytes_per_token": ours[0]["bytes_per_token"],
        "kv_bytes": ours[0]["kv_resident_bytes"],
        "peak_rss": max(r["peak_rss_bytes"] for r in ours),
        "rss_file": max(r["rss_file_bytes"] for r in ours),
        "rss_anon": max(r["rss_anon_bytes"] for r in ours),
        "bw": max(e["bw"]) if e["bw"] else 0.0,
        "ws_bw": max(e["ws_bw"]) if e["ws_bw"] else 0.0,
        "l_prefill": None, "l_decode": None, "l_prefill_med": None, "l_decode_med": None,
        "l_rss": max(e["llama_rss"]) if e["llama_rss"] else None,
        "l_info": (e["llama_pp"] + e["llama_tg"] + [None])[0],
        "cpu": median_or_none(e["cpu"]),
        "l_cpu": median_or_none(e["l_cpu"]),
        "idle": median_or_none(e["idle"]),
        "runs": len(ours),
        "threads": e["meta"]["threads"],
    }
    for kind, key in (("llama_pp", "l_prefill"), ("llama_tg", "l_decode")):
        samples = [x for t in e[kind] for x in t.get("samples_ts", [t.get("avg_ts", 0)])]
        if samples:
            s[key] = max(samples)
            s[key + "_med"] = statistics.median(samples)
    return s


def parse_profile(path):
    """[(percent, symbol)] from a perf report --stdio --sort symbol listing."""
    rows = []
    if not os.path.exists(path):
        return rows
    for line in open(path, errors="replace"):
        m = re.match(r"\s*([\d.]+)%\s+(\[[.k]\])\s+(.*\S)", line)
        if m:
            sym = re.split(r"\s{2,}", m.group(3))[0]  # drop perf's trailing columns
            rows.append((float(m.group(1)), ("[k] " + sym) if m.group(2) == "[k]" else sym))
    return rows


def categorize(rows):
    totals = {}
    for pct, sym in rows:
        name = next((n for n, rx in CATEGORIES if re.search(rx, sym)), "other")
        totals[name] = totals.get(name, 0.0) + pct
    return sorted(totals.items(), key=lambda kv: -kv[1])


def phase_label(phase, threads):
    """'decode' -> 'decode, 2 threads'; 'decode-t1' -> 'decode, 1 thread'."""
    m = re.match(r"(\w+)-t(\d+)$", phase)
    name, t = (m.group(1), int(m.group(2))) if m else (phase, threads)
    return "%s, %d thread%s" % (name, t, "" if t == 1 else "s")


def profile_text(work, phase, L, threads):
    rows = parse_profile(os.path.join(work, "profile_%s_L%d.txt" % (phase, L)))
    if not rows:
        return None
    cats = categorize(rows)
    top = ", ".join("%s %.0f%%" % (n, p) for n, p in cats[:4] if p >= 1.0)
    syms = "; ".join("`%s` %.1f%%" % (short_symbol(s), p) for p, s in rows[:5])
    return "profile of qevict (%s) at context %d: %s. Top symbols: %s." % (
        phase_label(phase, threads), L, top, syms)


def short_symbol(sym):
    sym = re.sub(r"\(anonymous namespace\)::", "", sym)
    sym = re.sub(r"\(.*\)$", "", sym)
    sym = re.sub(r"(?<=[<, ])(\w+::)+", "", sym)  # namespaces inside template arguments
    sym = re.sub(r"^qevict::", "", sym)
    return sym if len(sym) <= 90 else sym[:87] + "..."


def verdict(actual, target, what, unit_ratio=True):
    if actual is None:
        return "not measured"
    if actual >= target:
        return "**met** (%s %.2f%s, target %.2f%s)" % (
            what, actual, "x" if unit_ratio else "", target, "x" if unit_ratio else "")
    short = 100.0 * (target - actual) / target
    need = 100.0 * (target / actual - 1.0) if actual > 0 else float("inf")
    if unit_ratio:
        return "**missed** by %.0f%%: %s %.2fx, target %.2fx (needs %.0f%% more speed)" % (
            short, what, actual, target, need)
    return "**missed** by %.0f points: %.0f%% of the limit, target %.0f%% (needs %.0f%% more speed)" % (
        100 * (target - actual), 100 * actual, 100 * target, need)


def busy_banner(meta, work):
    """The page's first lines when other work shared the machine (BUSY_OK=1).

    Two signs: the 1-minute load average before anything ran (the script waits for it to fall
    below QUIET_LOAD), and the idle CPU in the second before each timed command (the script
    waits up to QUIET_WAIT seconds for QUIET_IDLE of it; nothing of the benchmark runs then).
    The load average at the end is no sign: it counts the benchmark's own threads."""
    try:
        start = float(meta["loadavg_start"][0])
        limit = float(meta["quiet_load"])
        quiet_idle = float(meta.get("quiet_idle", 0.75))
    except (KeyError, ValueError, IndexError, TypeError):
        return []
    idles = sorted(i for i in (read_timed(p)[2] for p in glob.glob(os.path.join(work, "*.rss")))
                   if i is not None)
    disturbed = sum(1 for i in idles if i < quiet_idle)
    reasons = []
    if start >= limit:
        reasons.append("1-minute load average %.2f before the first run, the quiet limit is %.2f"
                       % (start, limit))
    if idles and disturbed > len(idles) // 10:
        reasons.append("%d of %d timed runs started with less than %.0f%% of the CPU idle" % (
            disturbed, len(idles), 100 * quiet_idle))
    if not reasons:
        return []
    return ["**Unreliable: measured on a busy machine** (%s). Other work shared the cores; do not "
            "quote these figures. Rerun `make bench` on a quiet machine." % "; ".join(reasons), ""]


def render_machine(meta, any_speed):
    load_s, load_e = meta.get("loadavg_start", ["?"])[0], meta.get("loadavg_end", ["?"])[0]
    lines = [
        "## Machine and run",
        "",
        "| | |",
        "|---|---|",
        "| date | %s |" % meta.get("date", "?"),
        "| CPU | %s, %s cores visible, %.1f GiB RAM, Linux %s |" % (
            meta.get("cpu", "?"), meta.get("cores", "?"), meta.get("mem_total_kib", 0) / 2**20,
            meta.get("kernel", "?")),
        "| CPU SIMD flags | %s |" % " ".join(meta.get("cpu_flags", [])),
        "| qevict | `%s` at %s, kernels at SIMD level `%s` (runtime dispatch) |" % (
            meta.get("bin"), meta.get("qevict_commit", "?"), any_speed.get("simd", "?")),
        "| llama.cpp | %s |" % (meta.get("llama_version") or "not run (LLAMACPP=0)"),
        "| llama.cpp CMake flags | `%s` |" % (meta.get("llama_cmake_flags") or "n/a"),
        "| model | `%s` (%s) |" % (meta.get("model"), mib(any_speed.get("model_bytes", 0))),
        "| threads | %s (both engines) |" % meta.get("threads"),
        "| load average (1 min) | %s before the first run, %s at the end (which counts the "
       "benchmark's own threads) |" % (load_s, load_e),
        "",
    ]
    try:
        # The load at the end counts the benchmark's own threads: only the start says whether
        # other work was there.
        if float(load_s) > float(meta.get("cores", 1)):
            lines += ["Note: the load average exceeded the number of cores: other work shared the "
                      "machine and each run obtained only part of the CPU (rows \"CPU obtained\" "
                      "below). The engines ran interleaved and the best repetition of each is "
                      "reported, which favours the least disturbed runs. Still, a thread pool "
                      "whose threads meet at a barrier after every operation (llama.cpp's graph "
                      "executor) loses more when one of its threads is descheduled than one that "
                      "hands out work dynamically and does not wait for a late thread (qevict's), "
                      "so on a busy machine the 2-thread ratios favour qevict; the one-thread "
                      "table compares the kernels alone.", ""]
    except ValueError:
        pass
    return lines


def render_commands(meta):
    b, m, t, g, r = meta["bin"], meta["model"], meta["threads"], meta["gen"], meta["reps"]
    return [
        "## Commands",
        "",
        "Interleaved per context length L, %s round(s); P = the prompt length (L, or L - %s when L "
        "+ %s would pass the model's window):" % (meta["rounds"], g, g),
        "",
        "```",
        "%s bench -m %s --ctx L -t %s --gen %s --reps %s --json" % (b, m, t, g, r),
        "llama-bench -m %s -t %s -p P -n 0 -r %s -o json          # prefill" % (m, t, r),
        "llama-bench -m %s -t %s -p 0 -n %s -d P -r %s -o json    # decode after P tokens" % (
            m, t, g, r),
        "# the same with -t 1 at %s (one thread each)" % meta.get("ctx1", "-"),
        "%s bench -m %s --ctx L -t %s --gen %s --reps %s --json --bandwidth-mib 0 \\" % (
            b, m, t, g, meta.get("kv_reps", "?")),
        "    --kv-policy P --kv-budget B                             # KV table",
        "perf record -D -1 --control fifo:F -e cpu-clock -F 2999 -- \\",
        "    %s bench -m %s --ctx L -t T --gen %s --reps 1 --bandwidth-mib 0 \\" % (b, m, g),
        "    --perf-control F --perf-phase decode|prefill            # profiles",
        "```",
        "",
        "Each engine reports the best of its %s repetitions and the best over the rounds (the "
        "median of all repetitions is given too). Prefill is timed over the whole prompt from an "
        "empty cache; decode is %s steps after a prompt of P tokens (llama-bench's `-d`), greedy "
        "on the model's own logits for qevict. qevict prefills 256 tokens per forward pass; "
        "llama-bench uses its defaults (n_batch 2048, n_ubatch 512)." % (r, g),
        "",
    ]


def best_bandwidth(speed):
    """The machine's bandwidth: the best of every measurement in the run (GB/s)."""
    return max([b for e in speed.values() for b in e["bw"]] or [0.0])


def render_speed(speed, meta):
    lines = ["## qevict vs llama.cpp", ""]
    summaries = {}
    bw = best_bandwidth(speed)
    for L in sorted(speed):
        s = summarize(speed[L])
        s["bw"] = bw
        summaries[L] = s
        limit = bw * 1e9 / s["bytes_per_token"] if bw else None
        frac = (lambda d: d / limit if limit and d else None)
        lines += [
            "### Context %d (prompt %d tokens)" % (L, s["prompt_tokens"]),
            "",
            "| | qevict | llama.cpp | qevict / llama.cpp |",
            "|---|---:|---:|---:|",
            "| prefill tok/s (best) | %s | %s | %s |" % (
                fmt(s["prefill"]), fmt(s["l_prefill"]), ratio_str(s["prefill"], s["l_prefill"])),
            "| prefill tok/s (median) | %s | %s | %s |" % (
                fmt(s["prefill_med"]), fmt(s["l_prefill_med"]),
                ratio_str(s["prefill_med"], s["l_prefill_med"])),
            "| decode tok/s (best) | %s | %s | %s |" % (
                fmt(s["decode"]), fmt(s["l_decode"]), ratio_str(s["decode"], s["l_decode"])),
            "| decode tok/s (median) | %s | %s | %s |" % (
                fmt(s["decode_med"]), fmt(s["l_decode_med"]),
                ratio_str(s["decode_med"], s["l_decode_med"])),
            "| decode, % of the bandwidth limit | " + " | ".join(
                "n/a" if frac(d) is None else "%.0f%%" % (100 * frac(d))
                for d in (s["decode"], s["l_decode"])) + " | |",
            "| peak RSS | %s | %s | |" % (mib(s["peak_rss"]),
                                         mib(s["l_rss"]) if s["l_rss"] else "n/a"),
            "| CPU obtained per run (median; %d%% = all threads busy) | %s | %s | |" % (
                100 * meta["threads"], pct(s["cpu"]), pct(s["l_cpu"])),
            "",
            "%d interleaved runs per engine; median idle CPU just before a run: %s." % (
                s["runs"], pct(None if s["idle"] is None else 100 * s["idle"])),
            "",
            "Bandwidth limit: %s read per decoded token (weights %s + KV cache %s) / %.1f GB/s "
            "measured = %s tok/s. qevict's resident memory: %s file-backed (the mmap'd weights) "
            "+ %s anonymous (KV cache, scratch)." % (
                mib(s["bytes_per_token"]), mib(speed[L]["meta"]["weight_bytes_per_token"]),
                mib(s["kv_bytes"]), bw, fmt(limit), mib(s["rss_file"]), mib(s["rss_anon"])),
            "",
        ]
    return lines, summaries


def render_single_thread(work):
    speed = collect_speed(work, "speed1", "llama1")
    if not speed:
        return []
    lines = ["## One thread each", "",
             "The same comparison with one thread per engine (stage speed1 of scripts/bench.sh): "
             "no thread synchronisation, so on a busy machine these ratios reflect the kernels "
             "more than the thread pools.", "",
             "| context | prefill tok/s qevict | llama.cpp | ratio | decode tok/s qevict | "
             "llama.cpp | ratio | CPU obtained qevict / llama.cpp |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for L in sorted(speed):
        s = summarize(speed[L])
        lines.append("| %d | %s | %s | %s | %s | %s | %s | %s / %s |" % (
            L, fmt(s["prefill"]), fmt(s["l_prefill"]), ratio_str(s["prefill"], s["l_prefill"]),
            fmt(s["decode"]), fmt(s["l_decode"]), ratio_str(s["decode"], s["l_decode"]),
            pct(s["cpu"]), pct(s["l_cpu"])))
    return lines + [""]


def render_bandwidth(speed):
    j = next(iter(speed.values()))["meta"]
    bws = [b for e in speed.values() for b in e["bw"]]
    ws = [b for e in speed.values() for b in e["ws_bw"]]
    weights, llc = j["weight_bytes_per_token"], j.get("last_level_cache_bytes", 0)
    lines = [
        "## Memory bandwidth",
        "",
        "Read bandwidth measured by `qevict bench` with the same %d threads: each thread sums its "
        "own slice of a %s buffer, best of %d passes; best of %d measurements in this run: "
        "**%.1f GB/s** (median %.1f). Over a buffer the size of the weights read per token (%s) "
        "it reads %.1f GB/s." % (
            j["threads"], mib(j["bandwidth_buffer_bytes"]), j["bandwidth_passes"], len(bws),
            max(bws), statistics.median(bws), mib(weights), max(ws) if ws else 0.0),
        "",
    ]
    if llc and weights < llc:
        lines += ["The OS reports a %s last-level cache, larger than the %s of weights: decode may "
                  "be served partly from cache, and then its fraction of the DRAM limit can exceed "
                  "what DRAM alone allows." % (mib(llc), mib(weights)), ""]
    return lines


def render_targets(summaries, work, bw=0.0):
    def ratio_text(key):
        return ", ".join("%.1fx at %d" % (t[key], L) for L, t in TARGETS.items() if t[key])
    lines = ["## Targets", "",
             "As multiples of llama.cpp's speed at a context of so many tokens: decode >= %s, "
             "prefill >= %s. Decode at >= %s of the bandwidth limit; the decode ratio at longer "
             "contexts not below the one at %d; `%s` at %s decoding at %d tokens at >= %.0f%% of "
             "its own bandwidth limit (best-of-repetitions figures)." % (
                 ratio_text("decode"), ratio_text("prefill"),
                 ", ".join("%.0f%% at %d" % (100 * t["bw"], L) for L, t in TARGETS.items() if t["bw"]),
                 TARGET_CTX[-1], KV_TARGET["policy"], KV_TARGET["budget"], KV_TARGET["ctx"],
                 100 * KV_TARGET["share"]), ""]
    cpu = [(s["cpu"], s["l_cpu"]) for s in summaries.values() if s["cpu"] and s["l_cpu"]]
    if cpu:
        lines += ["CPU the runs obtained (median of the per-run shares; %d%% would be all threads "
                  "busy): qevict %s, llama.cpp %s." % (
                      100 * next(iter(summaries.values()))["threads"],
                      pct(statistics.median(c for c, _ in cpu)),
                      pct(statistics.median(c for _, c in cpu))), ""]
    causes = []
    for L in TARGET_CTX:
        s = summaries.get(L)
        if s is None:
            lines.append("- context %d: not measured" % L)
            continue
        dec = s["decode"] / s["l_decode"] if s["l_decode"] else None
        pre = s["prefill"] / s["l_prefill"] if s["l_prefill"] else None
        frac = s["decode"] * s["bytes_per_token"] / (s["bw"] * 1e9) if s["bw"] else None
        t = TARGETS[L]
        checks = []
        if t["decode"]:
            checks.append(("decode vs llama.cpp", verdict(dec, t["decode"], "decode ratio"),
                           "decode", dec is not None and dec < t["decode"]))
        if t["prefill"]:
            checks.append(("prefill vs llama.cpp", verdict(pre, t["prefill"], "prefill ratio"),
                           "prefill", pre is not None and pre < t["prefill"]))
        if t["bw"]:
            checks.append(("decode vs bandwidth limit", verdict(frac, t["bw"], "", unit_ratio=False),
                           "decode", frac is not None and frac < t["bw"]))
        for name, text, phase, missed in checks:
            lines.append("- context %d, %s: %s" % (L, name, text))
            if missed:
                causes.append((phase, L))
    base = summaries.get(TARGET_CTX[-1])
    if base and base["l_decode"]:
        for L in sorted(c for c in summaries if c > TARGET_CTX[-1]):
            s = summaries[L]
            if not s["l_decode"]:
                continue
            r, r0 = s["decode"] / s["l_decode"], base["decode"] / base["l_decode"]
            lines.append("- context %d, decode ratio not below %d's: %s (%.2fx against %.2fx)" % (
                L, TARGET_CTX[-1], "**met**" if r >= r0 else "**missed**", r, r0))
    kv = [r for r in collect_kv(work)[0] if r["policy"] == KV_TARGET["policy"] and
          r["budget"] == KV_TARGET["budget"] and r["ctx"] == KV_TARGET["ctx"]]
    if kv and bw and kv[0].get("bytes_per_token"):
        share = kv[0]["decode_tps"] * kv[0]["bytes_per_token"] / (bw * 1e9)
        lines.append("- `%s` at %s, context %d, decode vs its own bandwidth limit: %s (%.0f%%, "
                     "target %.0f%%; the KV-cache policies table)" % (
                         KV_TARGET["policy"], KV_TARGET["budget"], KV_TARGET["ctx"],
                         "**met**" if share >= KV_TARGET["share"] else "**missed**", 100 * share,
                         100 * KV_TARGET["share"]))
    lines.append("")
    if causes:
        lines += ["### Where the time goes (missed targets)", ""]
        seen = set()
        for phase, L in causes:
            if (phase, L) in seen:
                continue
            seen.add((phase, L))
            text = profile_text(work, phase, L, summaries[L]["threads"])
            lines.append("- " + (text or "no profile of %s at %d (perf unavailable)" % (phase, L)))
            single = profile_text(work, phase + "-t1", L, 1)
            if single:
                lines.append("- " + single)
        lines.append("")
    return lines


def render_profiles(work, threads):
    paths = sorted(glob.glob(os.path.join(work, "profile_*_L*.txt")))
    found = [(re.search(r"profile_(.+?)_L\d+", p).group(1), ctx_of(p), parse_profile(p))
             for p in paths]
    found = [(ph, L, rows) for ph, L, rows in found if rows]
    if not found:
        return []
    lines = ["## Profiles (qevict)", "",
             "`perf record -e cpu-clock`, switched on only around one phase of one repetition "
             "(`qevict bench --perf-control`); self time grouped by what the symbols do. With one "
             "thread there is no thread-pool synchronisation: what the kernels alone cost.", "",
             "| phase | context | where the time goes | top symbols |", "|---|---:|---|---|"]
    for phase, L, rows in sorted(found, key=lambda f: (f[0], f[1])):
        cats = "; ".join("%s %.0f%%" % (n, p) for n, p in categorize(rows) if p >= 1.0)
        syms = "; ".join("`%s` %.1f%%" % (short_symbol(s), p) for p, s in rows[:4])
        lines.append("| %s | %d | %s | %s |" % (phase_label(phase, threads), L, cats, syms))
    return lines + [""]


def collect_policy_rows(work, prefix):
    """The first row of every PREFIX_{policy}_{budget}_L{ctx}.json, with those three keys."""
    rows = []
    for path in sorted(glob.glob(os.path.join(work, prefix + "_*_L*.json"))):
        m = re.match(prefix + r"_(.+)_([^_]+)_L(\d+)\.json$", os.path.basename(path))
        j = try_load(path)
        if m and j and j.get("rows"):
            rows.append({"policy": m.group(1), "budget": m.group(2), "ctx": int(m.group(3)),
                         **j["rows"][0]})
    return rows


def full_and_order(rows):
    """The full cache's row per context, and the rows in table order (full first)."""
    full = {r["ctx"]: r for r in rows if r["policy"] == "full"}
    order = sorted(rows, key=lambda r: (r["ctx"], r["policy"] != "full", r["policy"],
                                        r["budget"]))
    return full, order


def merge_kv_rounds(work):
    """KV_ROUNDS > 1 (scripts/bench.sh): each row ran once a round, the rows interleaved, into
    kvround{R}_{policy}_{budget}_L{ctx}.json. Writes kv_{policy}_{budget}_L{ctx}.json as the
    round with the fastest decode (the best, as `qevict bench --reps` reports within a process),
    with every round's decode tok/s beside it (decode_tps_rounds)."""
    groups = {}
    for path in sorted(glob.glob(os.path.join(work, "kvround*_*_L*.json"))):
        m = re.match(r"kvround(\d+)_(.+\.json)$", os.path.basename(path))
        j = try_load(path)
        if m and j and j.get("rows"):
            groups.setdefault(m.group(2), []).append((int(m.group(1)), j))
    for name, runs in groups.items():
        runs.sort(key=lambda rj: rj[0])
        best = max(runs, key=lambda rj: rj[1]["rows"][0].get("decode_tps", 0.0))[1]
        merged = json.loads(json.dumps(best))
        merged["rows"][0]["decode_tps_rounds"] = [j["rows"][0].get("decode_tps") for _, j in runs]
        merged["rounds"] = len(runs)
        with open(os.path.join(work, "kv_" + name), "w") as f:
            json.dump(merged, f, indent=1)


def collect_kv(work):
    rows = collect_policy_rows(work, "kv")
    fails = []
    for path in sorted(glob.glob(os.path.join(work, "kvfail_*_L*.txt"))):
        m = re.match(r"kvfail_(.+)_([^_]+)_L(\d+)\.txt$", os.path.basename(path))
        msg = (open(path).read().strip().splitlines() or ["?"])[-1]
        fails.append((m.group(1), m.group(2), int(m.group(3)), msg))
    return rows, fails


def render_kv(work, meta, bw=0.0):
    """bw: the machine's read bandwidth (GB/s) measured in the speed stage, 0 when unknown."""
    rows, fails = collect_kv(work)
    lines = ["## KV-cache policies", ""]
    if not rows:
        return lines + ["Not measured.", ""]
    policies = sorted({r["policy"] for r in rows} - {"full"})
    if not policies:
        lines += ["Only `full` was measured: this build of qevict has no `--kv-budget` flag yet "
                  "(scripts/bench.sh runs the tiered policies at budgets %s once it has)." %
                  meta.get("kv_budgets"), ""]
    rounds = int(meta.get("kv_rounds") or 1)
    lines += ["`qevict bench --ctx L --kv-policy P --kv-budget B`, %s threads, %s decode steps, "
              "best of %s repetition(s)%s; KV bytes are what the cache holds (KvStats) after the "
              "prompt and at the end; the budget is a fraction of an fp16 cache of prompt + new "
              "tokens. *share of its bandwidth limit*: decode tok/s x the bytes one decode step "
              "reads (weights + the KV the cache holds, as `qevict bench` counts them) / the read "
              "bandwidth measured above (%s GB/s)." % (
                  meta.get("threads"), meta.get("gen"), meta.get("kv_reps", "?"),
                  (" a process, and the best of %d interleaved rounds (every row once a round, in "
                   "table order, so that the machine drifting during the run touches every row "
                   "alike; *decode rounds* lists each round's tok/s)" % rounds) if rounds > 1 else "",
                  fmt(bw) if bw else "not measured")
              + (" Budgets marked *(global)* are of the global layers' fp16 cache "
                 "(`--kv-budget-scope global`): the sliding-window layers' rings are kept whole "
                 "on top of it, in the KV columns." if meta.get("kv_scope") == "global" else ""),
              "",
              "| context | policy | budget | prefill tok/s | decode tok/s | "
              + ("decode rounds | " if rounds > 1 else "") + "decode vs full | "
              "share of its bandwidth limit | "
              "KV after prompt | KV at end | KV peak | KV budget | peak RSS | RSS at end |",
              "|---:|---|---:|---:|---:|" + ("---|" if rounds > 1 else "")
              + "---:|---:|---:|---:|---:|---:|---:|---:|"]
    full, order = full_and_order(rows)
    for r in order:
        f = full.get(r["ctx"])
        share = (pct(100.0 * r["decode_tps"] * r["bytes_per_token"] / (bw * 1e9))
                 if bw and r.get("bytes_per_token") and r.get("decode_tps") else "n/a")
        lines.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["ctx"], r["policy"], "-" if r["budget"] == "none" else
            r["budget"] + (" (global)" if meta.get("kv_scope") == "global" else ""),
            fmt(r["prefill_tps"]), fmt(r["decode_tps"]) + (
                " | " + ", ".join(fmt(x) for x in r.get("decode_tps_rounds") or [])
                if rounds > 1 else ""),
            ratio_str(r["decode_tps"], f["decode_tps"]) if f else "n/a", share,
            mib(r["kv_resident_bytes_after_prompt"]), mib(r["kv_resident_bytes"]),
            mib(r["kv_peak_bytes"]),
            "-" if r["kv_budget_bytes"] < 0 else mib(r["kv_budget_bytes"]),
            mib(r["peak_rss_bytes"]), mib(r["rss_bytes"])))
    lines.append("")
    held = [r for r in rows if r["policy"] != "full" and r["ctx"] in full and
            r["kv_peak_bytes"] >= 0.9 * full[r["ctx"]]["kv_peak_bytes"]]
    if held:
        lines += ["In %d of the %d budgeted rows the KV peak is within 10%% of the full cache's: "
                  "those rows held the prompt in fp16 until it ended (`--kv-prefill-chunk 0`, "
                  "the paper's prompt-end mode), so the budget bounds the KV bytes during "
                  "decoding but not the peak RSS." % (
                      len(held), sum(1 for r in rows if r["policy"] != "full")), ""]
    for p, b, L, msg in fails:
        lines.append("- %s at budget %s, context %d: failed: `%s`" % (p, b, L, msg))
    if fails:
        lines.append("")
    return lines + render_floor(work, rows) + render_follow_up(rows)


def render_floor(work, rows):
    """The speed-up no cache can pass: the full cache's decode at a short context (kvfloor_L*.json,
    where attention costs almost nothing) over its decode at each context of the table."""
    floors = [(ctx_of(p), try_load(p)) for p in glob.glob(os.path.join(work, "kvfloor_L*.json"))]
    floors = [(c, j["rows"][0]) for c, j in floors if j and j.get("rows")]
    if not floors:
        return []
    floor_ctx, floor = min(floors, key=lambda f: f[0])
    full, order = full_and_order(rows)
    lines = ["### The weights' floor", "",
             "The full cache at %d tokens, where attention costs almost nothing, decodes at %s "
             "tok/s in the same run (best of %s): about the time of the weights alone (matrix products, the "
             "output projection), which every policy pays (the little attention left in it makes "
             "the bound below slightly low). So no cache decodes much faster than that at any "
             "context, and its speed-up over the full cache is bounded:" % (
                 floor_ctx, fmt(floor["decode_tps"]), len(floor.get("decode_tps_samples") or [0])), ""]
    above = bytes_rows = False
    for L in sorted(full):
        f = full[L]
        if L <= floor_ctx or not f.get("decode_tps"):
            continue
        bound = floor["decode_tps"] / f["decode_tps"]
        best = [r for r in order if r["ctx"] == L and r["policy"] != "full" and r.get("decode_tps")]
        reached = "; ".join("`%s` at %s %s (%s of the way from 1x%s)" % (
            r["policy"], r["budget"], ratio_str(r["decode_tps"], f["decode_tps"]),
            pct(100.0 * (r["decode_tps"] / f["decode_tps"] - 1.0) / (bound - 1.0))
            if bound > 1.0 else "n/a", bytes_ratio(f, r)) for r in best)
        lines.append("- at %d tokens: about %.2fx at most (full cache %s tok/s)%s" % (
            L, bound, fmt(f["decode_tps"]), (": " + reached) if reached else ""))
        above = above or any(r["decode_tps"] > floor["decode_tps"] for r in best)
        bytes_rows = bytes_rows or any(bytes_ratio(f, r) for r in best)
    if above:
        lines += ["", "A row faster than the floor holds fewer tokens than the floor's %d in the "
                  "layers that grow with the context, or differs from it by the run-to-run noise "
                  "of its repetitions (a few percent on this machine): the bound is approximate, "
                  "not a measurement of any row." % floor_ctx]
    if bytes_rows:
        lines += ["", "*in bytes*: the full cache's bytes read per decoded token (weights and the "
                  "KV it holds, as `qevict bench` counts them) over the row's: the speed-up of a "
                  "decode that only streams memory, whatever the engine. Where a row's speed-up "
                  "passes it, the full cache reads its KV more slowly a byte than its weights "
                  "(its attention runs further below the memory bandwidth than the matrix "
                  "products), and a faster full-cache attention would bring the row's ratio "
                  "down toward it."]
    return lines + [""]


def bytes_ratio(full_row, row):
    """"; 1.36x in bytes": the full cache's bytes per decoded token over the row's, or ""."""
    if not full_row.get("bytes_per_token") or not row.get("bytes_per_token"):
        return ""
    return "; %.2fx in bytes" % (full_row["bytes_per_token"] / row["bytes_per_token"])


def cold_text(r):
    """The cold file's bytes on disk, and what the page cache held of them."""
    text = mib(r.get("kv_cold_bytes", 0))
    cached = r.get("kv_cold_page_cache_bytes")
    if cached is not None and cached >= 0:
        text += " (%s in page cache)" % mib(cached)
    return text


def render_follow_up(rows):
    """The next turn after the decode steps (`qevict bench --follow-up N`): its time to the first
    token, recalls included, beside the full cache's; the cold tier's bytes on disk and read."""
    measured = [r for r in rows if r.get("follow_up_tokens")]
    if not measured:
        return []
    full, order = full_and_order(measured)
    lines = ["### A follow-up question, and the cold tier", "",
             "The same runs: after the decode steps a later prompt of %d tokens is read as the "
             "conversation's next turn. *follow-up TTFT*: from its start to its first token, "
             "recalls from the cold tier included; *cold on disk*: the cold file's live bytes at "
             "the end (outside RAM), with what the OS page cache held of it then (the kernel's "
             "to take back, in no process's RSS, never counted as resident); *read / token*: cold-store bytes read per decoded token; *read / follow-up*: "
             "bytes the follow-up read; *routing / token* and *routing / follow-up*: the time the cache "
             "spent in routing steps (scores, recall's ranking and reads, tier moves) per decoded "
             "token and during the follow-up (`KvStats::routing_seconds`, last repetition; n/a "
             "in rows measured before it was counted)." % measured[0]["follow_up_tokens"], "",
             "| context | policy | budget | follow-up TTFT | vs full | cold on disk | "
             "read / token | read / follow-up | routing / token | routing / follow-up |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in order:
        f = full.get(r["ctx"])
        cold = r.get("kv_cold_bytes", 0) or 0
        lines.append("| %d | %s | %s | %s ms | %s | %s | %s | %s | %s | %s |" % (
            r["ctx"], r["policy"], "-" if r["budget"] == "none" else r["budget"],
            fmt(1000.0 * r["follow_up_ttft_s"], 0),
            "%.2fx" % (r["follow_up_ttft_s"] / f["follow_up_ttft_s"])
            if f and f.get("follow_up_ttft_s") else "n/a",
            cold_text(r) if cold else "-",
            ("%s KiB" % fmt(r.get("cold_read_bytes_per_token", 0) / 1024.0, 0)) if cold else "-",
            mib(r.get("cold_read_bytes_follow_up", 0)) if cold else "-",
            routing_text(r, "routing_ms_per_token", 2),
            routing_text(r, "routing_ms_follow_up", 1)))
    return lines + [""]


def routing_text(r, key, digits):
    """A row's routing time in ms (`qevict bench` JSON), '-' for a cache that never routes,
    n/a for a row measured before the time was counted."""
    if key not in r:
        return "n/a"
    if r["policy"] in ("full", "quest"):
        return "-"
    return "%s ms" % fmt(r[key], digits)


def render_cold(work, meta):
    """The follow-up from the disk (bench.sh stage `cold`): qevict-recall's follow-up with the
    cold file kept in the page cache or dropped from it first, with and without the next layer's
    prefetch, beside the full cache's follow-up at the same context (the KV table's run)."""
    runs = [("kept", "next-layer"), ("dropped", "next-layer"), ("dropped", "off")]
    rows = [(c, p, try_load(os.path.join(work, "cold_%s_%s.json" % (c, p)))) for c, p in runs]
    rows = [(c, p, j["rows"][0], read_timed(os.path.join(work, "cold_%s_%s.res" % (c, p))))
            for c, p, j in rows if j and j.get("rows")]
    if not rows:
        return []
    L = meta.get("cold_ctx", rows[0][2]["ctx"])
    full = try_load(os.path.join(work, "kv_full_none_L%s.json" % L))
    full_ttft = full["rows"][0].get("follow_up_ttft_s") if full and full.get("rows") else None
    lines = ["### The follow-up from the disk", "",
             "`qevict bench --ctx %s --gen 16 --reps %s --kv-policy qevict-recall --kv-budget %s "
             "--cold-page-cache C --kv-cold-prefetch P`, %s threads, one process per row. "
             "*kept*: the follow-up finds the cold file as the page cache holds it after the "
             "decode steps; *dropped*: the file is dropped from the page cache just before the "
             "follow-up (`posix_fadvise(DONTNEED)` after its dirty pages are written), so its "
             "reads go to the disk, as on a machine whose memory went elsewhere. *prefetch*: "
             "`next-layer` asks the kernel for the next layer's cold windows while a layer scans "
             "(docs/kv-cache.md, \"Reads and compute\"). Follow-up TTFT: best and median of the "
             "repetitions; *vs full*: against the full cache's follow-up in the KV table's run "
             "(%s)." % (L, meta.get("cold_reps", "?"), meta.get("cold_budget", "?"),
                        meta.get("threads"),
                        "%s ms" % fmt(1000.0 * full_ttft, 0) if full_ttft else "not measured"), "",
             "| page cache | prefetch | follow-up TTFT | median | vs full | read / follow-up | "
             "asked ahead | CPU obtained |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for cache, prefetch, r, (_, cpu, _) in rows:
        samples = r.get("follow_up_ttft_s_samples") or [r["follow_up_ttft_s"]]
        lines.append("| %s | %s | %s ms | %s ms | %s | %s | %s | %s |" % (
            cache, prefetch, fmt(1000.0 * r["follow_up_ttft_s"], 0),
            fmt(1000.0 * median_or_none(samples), 0),
            "%.2fx" % (r["follow_up_ttft_s"] / full_ttft) if full_ttft else "n/a",
            mib(r.get("cold_read_bytes_follow_up", 0)),
            mib(r.get("kv_cold_prefetch_bytes", 0)),
            "%.0f%%" % cpu if cpu else "n/a"))
    return lines + [""]


def render_memory(work, meta):
    """What the process is charged, next to the cache's ledger: one process per row."""
    rows = collect_policy_rows(work, "mem")
    lines = ["## Memory: the cache's ledger, what it keeps mapped, and the process", ""]
    if not rows:
        return lines + ["Not measured.", ""]
    lines += [
        "One `qevict bench --ctx L --gen %s --reps 1 [--kv-policy P --kv-budget B]` process per "
        "row, %s threads. *KV end*: the cache's ledger after the run (KvStats resident bytes); "
        "*KV peak*: its maximum, reached while the prompt is read (bounded prefill: the budget "
        "plus one %s-token chunk; `full`: every token); *mapped peak / end*: what the cache's "
        "pools and policy buffers hold from the OS (KvStats reserved bytes), at their maximum and "
        "after the run; *peak RSS / RSS end*: the whole process (weights included) as the OS "
        "counts it (VmHWM / VmRSS). *saved*: the full row's peak RSS minus this row's, as a share "
        "of the full cache's fp16 KV." % (meta.get("mem_gen", "?"), meta.get("threads"),
                                          next((r.get("kv_prefill_chunk") for r in rows
                                                if r.get("kv_prefill_chunk")), "?")), "",
        "| context | policy | budget | KV end | KV peak | mapped peak | mapped end | peak RSS | "
        "RSS end | saved | cold on disk |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    full, order = full_and_order(rows)
    for r in order:
        f = full.get(r["ctx"])
        saved = "-"
        if f and r["policy"] != "full" and f["kv_full_fp16_bytes"] > 0:
            saved = pct(100.0 * (f["peak_rss_bytes"] - r["peak_rss_bytes"]) / f["kv_full_fp16_bytes"])
        cold = r.get("kv_cold_bytes", 0) or 0
        lines.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["ctx"], r["policy"], "-" if r["budget"] == "none" else r["budget"],
            mib(r["kv_resident_bytes"]), mib(r["kv_peak_bytes"]),
            mib(r.get("kv_peak_reserved_bytes", 0)), mib(r.get("kv_reserved_bytes", 0)),
            mib(r["peak_rss_bytes"]), mib(r["rss_bytes"]), saved, cold_text(r) if cold else "-"))
    return lines + [""]


def render_llama_build(meta, summaries):
    info = next((s["l_info"] for s in summaries.values() if s["l_info"]), None)
    if not info:
        return []
    return [
        "## llama.cpp build", "",
        "scripts/bench_llamacpp.sh builds llama-bench from the llama.cpp copy vendored in the "
        "llama-cpp-python source distribution (%s, llama.cpp build %s), fetched with `pip download` "
        "into the git-ignored third_party_build/; nothing from it is committed. Settings llama-bench "
        "reported: n_batch %s, n_ubatch %s, flash_attn %s, K/V cache %s/%s, weight repacking %s." % (
            meta.get("llama_version", "?"), info.get("build_commit", "?"), info.get("n_batch"),
            info.get("n_ubatch"), info.get("flash_attn"), info.get("type_k"), info.get("type_v"),
            "on" if info.get("repack") else "off"),
        "",
        "It is built with GGML_NATIVE=OFF and the instruction sets named explicitly (AVX2, FMA, "
        "F16C, and AVX-512 F/BW/VL/DQ/VNNI when the CPU has them: the levels qevict's kernels use), "
        "with AMX off. A GGML_NATIVE=ON build of this version was seen to crash (SIGSEGV) on this "
        "kind of machine (Xeon with AVX-512 and AMX, in a sandbox) on any batch of more than one "
        "token while single-token batches worked: -march=native enables the AMX int8 path. The "
        "explicit configuration runs batched prefill correctly.", ""]


def splice_section(path, lines, meta, stages="memory"):
    """Replaces the page's section that starts with lines[0] (or inserts it before the next
    '## Profiles' / '## Commands' heading) with a section rendered from a run of its own stage,
    which says when and at what load it was measured."""
    heading = lines[0]
    load = meta.get("loadavg_start", ["?"])[0], meta.get("loadavg_end", ["?"])[0]
    section = [heading, "",
               "*This section alone was measured on %s (`STAGES=%s scripts/bench.sh`, qevict "
               "`%s`, load average %s at the start and %s at the end); the rest of the page "
               "comes from the run described above.*" % (meta.get("date", "?"), stages,
                                                          meta.get("qevict_commit", "?"), *load),
               ""] + lines[2:]
    page = open(path).read().rstrip("\n").split("\n")
    if heading in page:
        start = page.index(heading)
        end = next((i for i in range(start + 1, len(page)) if page[i].startswith("## ")),
                   len(page))
    else:
        start = next((i for i, l in enumerate(page)
                      if l.startswith("## Profiles") or l == "## Commands"), len(page))
        end = start
    page[start:end] = section
    with open(path, "w") as f:
        f.write("\n".join(page).rstrip() + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out")
    ap.add_argument("--merge-kv-rounds", action="store_true",
                    help="merge the KV table's rounds in WORK (scripts/bench.sh KV_ROUNDS) and exit")
    ap.add_argument("--section", choices=["memory", "kv"],
                    help="render this section alone into the existing page (its own run): the "
                         "memory table, or the KV-cache policies with the follow-up from the disk")
    ap.add_argument("--stages", default="memory", help="the STAGES of that run, for its note")
    args = ap.parse_args()
    if args.merge_kv_rounds:
        merge_kv_rounds(args.work)
        return
    if not args.out:
        ap.error("--out is required")
    meta = load_json(os.path.join(args.work, "meta.json"))
    if args.section == "memory":
        splice_section(args.out, render_memory(args.work, meta), meta, args.stages)
        return
    if args.section == "kv":
        splice_section(args.out, render_kv(args.work, meta) + render_cold(args.work, meta), meta,
                       args.stages)
        return
    speed = collect_speed(args.work)
    any_speed = next(iter(speed.values()))["meta"] if speed else {}
    model = os.path.basename(str(meta.get("model", "")))
    gemma = model.startswith("gemma")
    out = ["# Benchmarks" + (" (Gemma 3 270M)" if gemma else ""), "",
           "Generated by `make " + ("bench-gemma" if gemma else "bench") +
           "` (scripts/bench.sh, scripts/render_benchmarks.py); do not edit by hand.", ""]
    out += busy_banner(meta, args.work)
    if not gemma:
        out += ["The same comparison on the second reference model, Gemma 3 270M (Q4_K_M: Q4_K, "
                "Q5_0, Q6_K and Q8_0 weights, 15 sliding-window layers): "
                "[benchmarks-gemma.md](benchmarks-gemma.md) (`make bench-gemma`).", ""]
    out += render_machine(meta, any_speed)
    speed_lines, summaries = render_speed(speed, meta)
    out += render_targets(summaries, args.work, best_bandwidth(speed) if speed else 0.0)
    out += speed_lines
    out += render_single_thread(args.work)
    if speed:
        out += render_bandwidth(speed)
    out += render_kv(args.work, meta, best_bandwidth(speed) if speed else 0.0)
    out += render_cold(args.work, meta)
    out += render_memory(args.work, meta)
    out += render_profiles(args.work, meta.get("threads", 0))
    out += render_commands(meta)
    out += render_llama_build(meta, summaries)
    with open(args.out, "w") as f:
        f.write("\n".join(out).rstrip() + "\n")


if __name__ == "__main__":
    main()
