#!/usr/bin/env python3
"""End-to-end tests of `qevict serve` with real clients.

Starts the server on a free loopback port and drives it with the official `openai` Python
client (chat, completions, streaming, usage, stop strings, max_tokens, the "kv" extension) and
with curl (error cases), then checks that a client disconnecting mid-stream frees its slot, that
admission control queues and rejects as documented, and that a bounded load test (8 concurrent
streaming clients x 3 rounds) completes without errors and without resident-memory growth.

Prints one line per test and 'N passed, N failed' at the end; exits non-zero on any failure.
Usage: test_server.py --binary build/qevict --model models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
from openai import OpenAI

CHAT = [{"role": "user", "content": "What is the capital of France?"}]
# A question the reference model answers within 16 tokens, with the full cache and with KV_QEVICT
# ("The capital of France is Paris."); to CHAT it rambles in French until the length limit.
CAPITAL = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
KV_QEVICT = {"kv": {"policy": "qevict", "budget": 0.1}}


class ServerProcess:
    """A `qevict serve` child on 127.0.0.1 and an ephemeral port, stderr kept in a file."""

    def __init__(self, binary, model, *flags, startup_timeout=120):
        self.log = tempfile.NamedTemporaryFile(prefix="qevict-serve-", suffix=".log", delete=False)
        cmd = [binary, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0", *flags]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log)
        try:
            self._wait_until_healthy(time.time() + startup_timeout)
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise

    def _wait_until_healthy(self, deadline):
        self.port = None
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited with %d: %s" % (self.proc.returncode,
                                                                   self.stderr()))
            match = re.search(r"http://127\.0\.0\.1:(\d+)", self.stderr())
            if match:
                self.port = int(match.group(1))
            else:
                time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("server did not start: " + self.stderr())
        while time.time() < deadline:
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server never became healthy: " + self.stderr())

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def stderr(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def get(self, path, timeout=30):
        try:
            with urllib.request.urlopen(self.url(path), timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def post(self, path, payload, timeout=120):
        data = json.dumps(payload).encode()
        req = urllib.request.Request(self.url(path), data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def metrics(self):
        status, text = self.get("/metrics")
        assert status == 200, status
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def memory_kb(self, field="VmRSS"):
        """A field of /proc/<pid>/status in kB: VmRSS, RssAnon (heap, KV), RssFile (weights)."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise RuntimeError("no " + field)

    def client(self, timeout=120):
        return OpenAI(base_url=self.url("/v1"), api_key="unused", max_retries=0, timeout=timeout)

    def remove_log(self):
        os.unlink(self.log.name)

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("server did not stop within %d s of SIGTERM" % timeout)
        return self.proc.returncode


def wait_until(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


def curl(server, path, *args):
    """Runs curl against the server; returns (status, parsed JSON body)."""
    out = subprocess.run(["curl", "-s", "-S", "-o", "-", "-w", "\n%{http_code}", *args,
                          server.url(path)], capture_output=True, timeout=120, check=True)
    body, _, status = out.stdout.decode(errors="replace").rpartition("\n")
    try:
        parsed = json.loads(body) if body else None
    except json.JSONDecodeError:
        parsed = {"unparsed": body}
    return int(status), parsed


def expect_error(result, status, code=None, param=None, contains=None):
    got_status, body = result
    assert got_status == status, "status %d, want %d: %s" % (got_status, status, body)
    assert isinstance(body, dict) and "error" in body, "not an OpenAI error: %r" % (body,)
    err = body["error"]
    assert err.get("message"), err
    assert "type" in err, err
    if code is not None:
        assert err.get("code") == code, "code %r, want %r: %s" % (err.get("code"), code, err)
    if param is not None:
        assert err.get("param") == param, "param %r, want %r: %s" % (err.get("param"), param, err)
    if contains is not None:
        assert contains in err["message"], "%r not in %r" % (contains, err["message"])
    return err


def send_request(server, path, payload, headers=None):
    """Sends a POST on a raw socket (so that the test can hang up whenever it likes)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    body = json.dumps(payload).encode()
    extra = "".join("%s: %s\r\n" % item for item in (headers or {}).items()).encode()
    sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra +
                 b"Content-Type: application/json\r\nContent-Length: " +
                 str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


def open_stream(server, path, payload, events=2):
    """Sends a streaming request and reads until `events` SSE events arrived."""
    sock = send_request(server, path, payload)
    received = b""
    while received.count(b"data: ") < events:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("stream ended early: %r" % received[-500:])
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received[:200]
    return sock


# ---- tests on the main server -----------------------------------------------------------------

def test_health_and_models(srv, args):
    status, body = srv.get("/health")
    assert status == 200 and json.loads(body)["status"] == "ok", body
    models = srv.client().models.list()
    ids = [m.id for m in models.data]
    assert ids == ["SmolLM2-135M-Instruct.Q4_1"], ids
    assert srv.client().models.retrieve(ids[0]).id == ids[0]


def test_chat_non_streaming(srv, args):
    r = srv.client().chat.completions.create(model="any", messages=CAPITAL, max_tokens=16,
                                             temperature=0, extra_body=KV_QEVICT)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-"), r
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content.strip(), choice
    assert choice.finish_reason in ("stop", "length"), choice.finish_reason
    u = r.usage
    assert u.prompt_tokens > 5 and 1 <= u.completion_tokens <= 16, u
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens, u
    kv = r.model_extra["kv"]
    assert kv["policy"] == "qevict" and kv["budget_bytes"] > 0, kv
    # The answer itself, whatever the finish reason: hitting the length limit without it fails.
    assert "paris" in choice.message.content.lower(), (choice.message.content, choice.finish_reason)


def test_chat_streaming_matches_non_streaming(srv, args):
    client = srv.client()
    whole = client.chat.completions.create(model="any", messages=CHAT, max_tokens=12,
                                           temperature=0, extra_body=KV_QEVICT)
    stream = client.chat.completions.create(model="any", messages=CHAT, max_tokens=12,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body=KV_QEVICT)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant", chunks[0]
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and
              c.choices[0].finish_reason]
    assert finish == [whole.choices[0].finish_reason], finish
    assert text == whole.choices[0].message.content, (text, whole.choices[0].message.content)
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None, chunks[-1]
    assert usage.completion_tokens == whole.usage.completion_tokens, (usage, whole.usage)
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_completions(srv, args):
    client = srv.client()
    r = client.completions.create(model="any", prompt="Once upon a time", max_tokens=5,
                                  temperature=0)
    assert r.object == "text_completion" and r.id.startswith("cmpl-"), r
    assert r.usage.completion_tokens <= 5 and r.usage.prompt_tokens >= 3, r.usage
    assert r.choices[0].text, r
    streamed = client.completions.create(model="any", prompt="Once upon a time", max_tokens=5,
                                         temperature=0, stream=True)
    text = "".join(c.choices[0].text for c in streamed if c.choices)
    assert text == r.choices[0].text, (text, r.choices[0].text)
    default = client.completions.create(model="any", prompt="Once upon a time", temperature=0)
    assert default.usage.completion_tokens <= 16, default.usage  # OpenAI's default max_tokens
    tokens = client.completions.create(model="any", prompt=[1, 504, 2353], max_tokens=2)
    assert tokens.usage.prompt_tokens == 3, tokens.usage


def test_max_tokens_is_honoured(srv, args):
    client = srv.client()
    for n in (1, 7):
        r = client.completions.create(model="any", prompt="Count: one, two, three,",
                                      max_tokens=n, temperature=0)
        assert r.usage.completion_tokens == n, (n, r.usage)
        assert r.choices[0].finish_reason == "length", r.choices[0]
    r = client.chat.completions.create(model="any", messages=CHAT, max_completion_tokens=3,
                                       temperature=0)
    assert r.usage.completion_tokens <= 3, r.usage


def test_stop_strings(srv, args):
    client = srv.client()
    prompt = "The first five planets from the sun are"
    full = client.completions.create(model="any", prompt=prompt, max_tokens=24,
                                     temperature=0).choices[0].text
    words = [w for w in re.findall(r"[A-Za-z]{3,}", full) if full.find(w) > 0]
    assert words, "no stop candidate in %r" % full
    stop = words[0]
    expected = full[:full.find(stop)]
    r = client.completions.create(model="any", prompt=prompt, max_tokens=24, temperature=0,
                                  stop=[stop, "@@never@@"])
    assert r.choices[0].text == expected, (r.choices[0].text, expected, stop)
    assert r.choices[0].finish_reason == "stop", r.choices[0]
    streamed = client.completions.create(model="any", prompt=prompt, max_tokens=24,
                                         temperature=0, stop=stop, stream=True)
    text = "".join(c.choices[0].text for c in streamed if c.choices)
    assert text == expected, (text, expected)


def test_sampling_is_seeded(srv, args):
    client = srv.client()
    kwargs = dict(model="any", prompt="My favourite colour is", max_tokens=10, temperature=1.0,
                  top_p=0.9)
    a = client.completions.create(seed=1234, **kwargs).choices[0].text
    b = client.completions.create(seed=1234, **kwargs).choices[0].text
    assert a == b, (a, b)


LONG_CHAT = [{"role": "user", "content": "".join(
    "Record %d: the crate with serial %d went to dock %d. " % (i, 1000 + 37 * i, i % 9)
    for i in range(30)) + "\nWhich dock did the crate with serial 1370 go to?"}]


def test_kv_policies(srv, args):
    """Each per-request "kv" is applied: the policy is echoed, the byte budget is the requested
    fraction of the fp16 cache of prompt + max_tokens (or the requested cap), and the resident
    bytes reported stay under it (quest: every token resident, the budget caps what it attends)."""
    client = srv.client()
    max_tokens = 8
    for kv in ({"policy": "full"}, {"policy": "streaming", "budget": 0.5},
               {"policy": "h2o", "budget_bytes": 2000000},
               {"policy": "qevict", "budget": 0.3, "bits": 4, "prefill_chunk": 64},
               {"policy": "qevict-qa", "budget": 0.2}, {"policy": "snapkv", "budget": 0.15},
               {"policy": "quest", "budget": 0.1}):
        r = client.chat.completions.create(model="any", messages=LONG_CHAT, max_tokens=max_tokens,
                                           temperature=0, extra_body={"kv": kv})
        got = r.model_extra["kv"]
        assert got["policy"] == kv["policy"], (kv, got)
        assert r.usage.completion_tokens >= 1
        assert got["tokens_seen"] >= r.usage.prompt_tokens, (kv, got, r.usage)
        per_token = got["full_fp16_bytes"] // got["tokens_seen"]
        assert per_token * got["tokens_seen"] == got["full_fp16_bytes"], got
        if kv["policy"] == "full":
            assert got["budget_bytes"] == -1 and got["evictions"] == 0, got
            continue
        if kv["policy"] == "quest":  # every token resident; the budget caps what decoding reads
            assert got["budget_bytes"] == -1 and not got["infeasible"], got
            assert got["resident_bytes"] >= got["full_fp16_bytes"], got
            assert 0 < got["attended_fraction"] < 0.5, got
            continue
        if "budget_bytes" in kv:
            expected = kv["budget_bytes"]
        else:
            expected = int(kv["budget"] * (r.usage.prompt_tokens + max_tokens) * per_token)
        assert abs(got["budget_bytes"] - expected) <= 1, (kv, got, expected)
        assert not got["infeasible"], (kv, got)
        assert 0 < got["resident_bytes"] <= got["budget_bytes"], (kv, got)
        assert got["evictions"] > 0, (kv, got)  # it routed: the prompt alone exceeds the budget
        assert got["resident_bytes"] < got["full_fp16_bytes"], (kv, got)


def test_reconstruction_policies_score_and_match_run(srv, args):
    """qevict-zip and kvzip (score source: reconstruction) get their reconstruction scores on
    the server as in `qevict run`: the response's kv stats say the pass ran (tokens forwarded),
    the first routing step evicted, and the greedy text equals `run`'s on the same prompt, policy
    and budget. A prompt with no user text to reconstruct is refused with a 400."""
    prompt = parcel_document(offset=5, chars=1500) + "\nThe parcel marked 664 is on shelf"
    max_tokens = 12
    for policy in ("qevict-zip", "kvzip"):
        kv = {"policy": policy, "budget": 0.2}
        status, body = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": max_tokens,
                                                    "temperature": 0, "kv": kv})
        assert status == 200, body
        got = body["kv"]
        assert got["policy"] == policy, got
        assert got.get("external_score_tokens", 0) > body["usage"]["prompt_tokens"], got
        assert got["external_score_s"] > 0, got
        assert got["evictions"] > 0, got
        # The server's slots compute on one thread each (-t 2 over 2 slots): so does `run`.
        run = subprocess.run(
            [args.binary, "run", "-m", args.model, "-p", prompt, "-n", str(max_tokens),
             "--temp", "0", "-t", "1", "--kv-policy", policy, "--kv-budget", "0.2"],
            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "reconstruction scoring: " in run.stderr, run.stderr[-2000:]
        assert run.stdout == body["choices"][0]["text"] + "\n", (policy, run.stdout, body)
    status, body = srv.post("/v1/chat/completions", {
        "messages": [{"role": "system", "content": "You answer briefly."}], "max_tokens": 4,
        "kv": {"policy": "kvzip", "budget": 0.2}})
    assert status == 400 and "reconstruct" in body["error"]["message"], (status, body)


def test_port_in_use_is_a_clean_error(srv, args):
    out = subprocess.run([args.binary, "serve", "-m", args.model, "--port", str(srv.port)],
                         capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 1, (out.returncode, out.stderr[-500:])
    assert b"cannot listen" in out.stderr, out.stderr[-500:]
    assert b"pick another --port" in out.stderr, out.stderr[-500:]


def test_openai_client_sees_errors(srv, args):
    client = srv.client()
    try:
        client.chat.completions.create(model="any", messages=CHAT,
                                       extra_body={"kv": {"policy": "nope"}})
    except openai.BadRequestError as e:
        assert e.status_code == 400 and "nope" in str(e), e
    else:
        raise AssertionError("unknown policy was accepted")


def test_curl_error_cases(srv, args):
    chat = "/v1/chat/completions"
    hello = '"messages": [{"role": "user", "content": "hi"}]'
    expect_error(curl(srv, chat, "-d", "{not json"), 400, code="invalid_json")
    expect_error(curl(srv, chat, "-d", ""), 400)
    expect_error(curl(srv, chat, "-d", '{"messages": "hi"}'), 400, param="messages")
    expect_error(curl(srv, chat, "-d", "{%s, \"max_tokens\": \"ten\"}" % hello), 400,
                 param="max_tokens")
    expect_error(curl(srv, chat, "-d", "{%s, \"temperature\": \"hot\"}" % hello), 400,
                 param="temperature")
    expect_error(curl(srv, chat, "-d", "{%s, \"stream\": \"yes\"}" % hello), 400, param="stream")
    expect_error(curl(srv, chat, "-d", "{%s, \"kv\": {\"policy\": \"nope\"}}" % hello), 400,
                 param="kv.policy", contains="nope")
    for budget in ("0", "2", "-1"):
        expect_error(curl(srv, chat, "-d", "{%s, \"kv\": {\"policy\": \"qevict\", "
                          "\"budget\": %s}}" % (hello, budget)), 400, param="kv.budget")
    expect_error(curl(srv, chat, "-d", "{%s, \"max_tokens\": 100000}" % hello), 400,
                 code="context_length_exceeded")
    expect_error(curl(srv, chat, "-d", "{%s, \"max_tokens\": 8185}" % hello), 400,
                 code="context_length_exceeded")  # fits alone, not after the prompt
    expect_error(curl(srv, "/v1/completions", "-d", '{"prompt": [1, 99999999]}'), 400,
                 param="prompt[1]")
    expect_error(curl(srv, chat, "-d", "{%s, \"n\": 3}" % hello), 400, param="n",
                 contains="send one request per choice")
    with tempfile.NamedTemporaryFile(suffix=".json") as bad_utf8:
        bad_utf8.write(b'{"messages": [{"role": "user", "content": "\xff"}], "max_tokens": 2}')
        bad_utf8.flush()
        expect_error(curl(srv, chat, "--data-binary", "@" + bad_utf8.name), 400,
                     code="invalid_json")
    with tempfile.NamedTemporaryFile(suffix=".json") as big:
        big.write(b'{"prompt": "' + b"a" * (9 << 20) + b'"}')
        big.flush()
        expect_error(curl(srv, "/v1/completions", "--data-binary", "@" + big.name), 413)
        expect_error(curl(srv, "/v1/completions", "-H", "Expect:", "--data-binary",
                          "@" + big.name), 413, contains="a larger --max-body")
    expect_error(curl(srv, "/v1/nope"), 404)
    expect_error(curl(srv, "/v1/models/other-model"), 404)
    expect_error(curl(srv, "/v1/nope", "-d", "{}"), 404)
    expect_error(curl(srv, chat), 405)  # GET on a POST route
    expect_error(curl(srv, "/health", "-X", "DELETE"), 405)
    # After all that, everyone is still served.
    status, body = srv.get("/health")
    assert status == 200, body
    r = srv.client().completions.create(model="any", prompt="Hello", max_tokens=2)
    assert r.usage.completion_tokens >= 1


def test_client_disconnect_mid_stream(srv, args):
    before = srv.metrics()
    sock = open_stream(srv, "/v1/completions",
                       {"prompt": "Once upon a time", "max_tokens": 2000, "temperature": 0,
                        "stream": True}, events=3)
    sock.close()
    wait_until(lambda: srv.metrics()["qevict_requests_cancelled_total"] >
               before["qevict_requests_cancelled_total"], 30, "the cancelled stream to be noticed")
    wait_until(lambda: srv.metrics()["qevict_slots_active"] == 0, 10, "the slot to be freed")
    after = srv.metrics()
    generated = (after["qevict_tokens_generated_total"] -
                 before["qevict_tokens_generated_total"])
    assert generated < 1000, "generation went on after the disconnect: %d tokens" % generated
    r = srv.client().chat.completions.create(model="any", messages=CHAT, max_tokens=4)
    assert r.usage.completion_tokens >= 1


def test_client_disconnect_while_waiting_for_a_whole_response(srv, args):
    """A non-streaming client (asking for gzip, as the openai package does) that hangs up."""
    before = srv.metrics()
    sock = send_request(srv, "/v1/completions",
                        {"prompt": "Once upon a time", "max_tokens": 2000, "temperature": 0},
                        headers={"Accept-Encoding": "gzip, deflate"})
    wait_until(lambda: srv.metrics()["qevict_slots_active"] == 1, 30, "the generation to start")
    time.sleep(0.5)
    sock.close()
    wait_until(lambda: srv.metrics()["qevict_requests_cancelled_total"] >
               before["qevict_requests_cancelled_total"], 30, "the hang-up to be noticed")
    wait_until(lambda: srv.metrics()["qevict_slots_active"] == 0, 10, "the slot to be freed")
    generated = (srv.metrics()["qevict_tokens_generated_total"] -
                 before["qevict_tokens_generated_total"])
    assert generated < 1000, "generation went on after the hang-up: %d tokens" % generated


LOG_LINE = re.compile(
    r"^qevict serve: request (?P<method>\S+) (?P<path>\S+) (?P<status>\d{3}) "
    r"prompt=(?P<prompt>\d+|-) cached=(?P<cached>\d+|-) generated=(?P<generated>\d+|-) "
    r"ttft_ms=(?P<ttft>[0-9.]+|-) decode_tps=(?P<tps>[0-9.]+|-) policy=(?P<policy>\S+) "
    r"resident_bytes=(?P<resident>\d+|-) total_ms=(?P<total>[0-9.]+|-)$", re.M)


def log_lines(srv, marker):
    """The request log lines (-v) after the line of the request to `marker`."""
    lines = [m.groupdict() for m in LOG_LINE.finditer(srv.stderr())]
    for k in range(len(lines) - 1, -1, -1):
        if lines[k]["path"] == marker:
            return lines[k + 1:]
    return lines


def test_request_log_line(srv, args):
    """One line per response with -v, in the documented format (docs/server.md)."""
    marker = "/log-marker-%d" % time.time_ns()
    assert srv.get(marker)[0] == 404
    client = srv.client()
    r = client.chat.completions.create(model="any", messages=CAPITAL, max_tokens=8, temperature=0,
                                       extra_body=KV_QEVICT)
    chunks = list(client.chat.completions.create(model="any", messages=CAPITAL, max_tokens=8,
                                                 temperature=0, stream=True))
    assert chunks
    srv.get("/health")

    # A request of an earlier test may still end after the marker (a client that went away, its
    # generation finishing): this test's lines are found by what they are. A streamed response
    # is logged once its connection's handler returns, which can be after the client has read
    # the last chunk and sent /health on another connection: only the whole response's line is
    # sure to come first. An earlier test's request may use `qevict` too (seen under load: a
    # 739-token prompt's line came after the marker), so the whole response's line is the one
    # with this request's prompt length (a line that miscounted it is never found: the test fails).
    def ours():
        whole = streamed = health = None
        for line in log_lines(srv, marker):
            chat = line["path"] == "/v1/chat/completions"
            if whole is None:
                if (chat and line["policy"] == "qevict" and
                        line["prompt"] == str(r.usage.prompt_tokens)):
                    whole = line
            elif streamed is None and chat and line["policy"] == "full":
                streamed = line
            elif health is None and line["path"] == "/health":
                health = line
        return [x for x in (whole, streamed, health) if x is not None]
    wait_until(lambda: len(ours()) == 3, 10, "this test's three log lines")
    whole, streamed, health = ours()
    assert whole["method"] == "POST" and whole["path"] == "/v1/chat/completions", whole
    assert whole["status"] == "200" and whole["policy"] == "qevict", whole
    assert int(whole["prompt"]) == r.usage.prompt_tokens, (whole, r.usage)
    assert int(whole["generated"]) == r.usage.completion_tokens, (whole, r.usage)
    assert int(whole["cached"]) == r.usage.prompt_tokens_details.cached_tokens, (whole, r.usage)
    assert int(whole["resident"]) == r.model_extra["kv"]["resident_bytes"], whole
    for line in (whole, streamed):
        assert float(line["ttft"]) > 0 and float(line["tps"]) > 0, line
        assert float(line["ttft"]) <= float(line["total"]), line
    assert streamed["policy"] == "full", streamed  # the server's default
    assert health["path"] == "/health" and health["status"] == "200", health
    for key in ("prompt", "cached", "generated", "ttft", "tps", "policy", "resident"):
        assert health[key] == "-", health
    assert float(health["total"]) >= 0, health


def test_web_page_is_served(srv, args):
    """The page and its files from the binary, with their types and validators; /props."""
    with urllib.request.urlopen(srv.url("/"), timeout=30) as r:
        page = r.read().decode()
        assert r.headers["Content-Type"] == "text/html; charset=utf-8", r.headers
        assert r.headers["Cache-Control"] == "no-cache", r.headers
        etag = r.headers["ETag"]
    assert '<script src="/web/app.js">' in page and "/web/style.css" in page
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        with urllib.request.urlopen(srv.url("/web/" + name), timeout=30) as r:
            assert r.headers["Content-Type"].startswith(kind), r.headers
            assert len(r.read()) > 1000
    req = urllib.request.Request(srv.url("/"), headers={"If-None-Match": etag})
    try:
        urllib.request.urlopen(req, timeout=30)
        raise AssertionError("no 304 for the page's own ETag")
    except urllib.error.HTTPError as e:
        assert e.code == 304, e.code
    assert srv.get("/web/missing.js")[0] == 404
    expect_error(curl(srv, "/", "-d", "{}"), 405, code="method_not_allowed")
    status, body = srv.get("/props")
    assert status == 200, body
    props = json.loads(body)
    names = [p["name"] for p in props["kv"]["policies"]]
    assert "qevict" in names and "full" in names and props["kv"]["default_policy"] == "full"
    assert props["n_ctx"] > 0 and props["total_slots"] == 2 and props["sessions"] is True
    # The build that answers, as `qevict --version` names it (llama.cpp's build_info field).
    version = subprocess.run([args.binary, "--version"], capture_output=True, text=True).stdout
    assert props["build_info"] and "(%s)" % props["build_info"] in version, (props, version)


def test_metrics(srv, args):
    m = srv.metrics()
    for name in ("qevict_tokens_generated_total", "qevict_tokens_per_second",
                 "qevict_decode_tokens_per_second", 'qevict_kv_resident_bytes{tier="fp16"}',
                 'qevict_kv_resident_bytes{tier="quant"}', 'qevict_kv_resident_bytes{tier="meta"}',
                 'qevict_kv_resident_bytes{tier="cold"}', "qevict_kv_promotions_total",
                 "qevict_kv_demotions_total", "qevict_kv_evictions_total", "qevict_queue_length",
                 "qevict_slots_active", "qevict_kv_reserved_bytes", "qevict_kv_mapped_bytes",
                 'qevict_requests_total{route="/v1/chat/completions",status="200"}',
                 'qevict_requests_total{route="/v1/chat/completions",status="400"}'):
        assert name in m, "missing %s" % name
    assert m["qevict_tokens_generated_total"] > 0
    assert m["qevict_decode_tokens_per_second"] > 0


def run_load_round(srv, one, rnd, clients=8):
    """Round `rnd` of a load test: one(i, rnd) for every client at once; every request must
    complete, and the server must come back to no active slot."""
    with ThreadPoolExecutor(max_workers=clients) as pool:
        futures = [pool.submit(one, i, rnd) for i in range(clients)]
        errors = []
        for f in futures:
            try:
                f.result(timeout=300)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(repr(e))
    assert not errors, "round %d: %s" % (rnd + 1, errors)
    wait_until(lambda: srv.metrics()["qevict_slots_active"] == 0, 10, "idle slots")


def test_load_8_streaming_clients(srv, args):
    clients = [srv.client() for _ in range(8)]
    kvs = [{"policy": "qevict", "budget": 0.1}, {"policy": "full"},
           {"policy": "streaming", "budget": 0.5}, {"policy": "qevict", "budget": 0.5, "bits": 4}]

    def one(i, rnd):
        stream = clients[i].chat.completions.create(
            model="any", messages=[{"role": "user", "content": "Tell me about the number %d."
                                    % (i * 3 + rnd)}],
            max_tokens=10, temperature=0.7, seed=i, stream=True,
            stream_options={"include_usage": True}, extra_body={"kv": kvs[i % len(kvs)]})
        chunks = list(stream)
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    rss, anon = [], []
    start = time.time()
    for rnd in range(3):
        run_load_round(srv, one, rnd)
        rss.append(srv.memory_kb("VmRSS"))
        anon.append(srv.memory_kb("RssAnon"))
    m = srv.metrics()
    assert m["qevict_queue_length"] == 0 and m['qevict_kv_resident_bytes{tier="fp16"}'] == 0, m
    print("    load: 3 rounds x 8 streaming clients in %.1f s; after each round VmRSS %s kB, "
          "of which RssAnon %s kB" % (time.time() - start, rss, anon))
    if args.sanitized:
        print("    (sanitized build: RSS growth not checked, ASan's quarantine grows by design)")
    else:
        assert rss[2] <= rss[1] * 1.10, "resident memory grew from %d to %d kB" % (rss[1], rss[2])


def test_soak_streaming_clients_and_sessions(srv, args):
    """`make test-long`'s soak: 20 rounds of 8 streaming clients (every policy family, 2- and
    4-bit archives, kept conversations that come back) against one server. Every request
    completes; no slot, queue entry or fp16 window is left behind; the process's resident
    memory after the last round is within 10% of that after round 5 (allocator warm-up)."""
    rounds = 8 if args.sanitized else 20
    kvs = [{"policy": "qevict", "budget": 0.1}, {"policy": "full"},
           {"policy": "snapkv", "budget": 0.2}, {"policy": "qevict", "budget": 0.5, "bits": 4},
           {"policy": "h2o", "budget": 0.3}, {"policy": "qevict-qa", "budget": 0.2},
           {"policy": "mikv", "budget": 0.2}, {"policy": "streaming", "budget": 0.5}]
    clients = [srv.client() for _ in range(8)]
    history = [[] for _ in range(8)]

    def one(i, rnd):
        # Clients 0-3 continue one conversation each (a kept session when the server still has
        # it); clients 4-7 start a new one every round.
        if i < 4:
            messages = history[i] + [{"role": "user", "content": "Add %d to that." % rnd}]
        else:
            messages = [{"role": "user", "content": "Tell me about the number %d." % (i + rnd)}]
        stream = clients[i].chat.completions.create(
            model="any", messages=messages, max_tokens=8, temperature=0.7, seed=i + rnd,
            stream=True, stream_options={"include_usage": True},
            extra_body={"kv": kvs[(i + rnd) % len(kvs)]})
        chunks = list(stream)
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        if i < 4:
            history[i] = (messages + [{"role": "assistant", "content": text}])[-6:]
        return text

    rss = []
    start = time.time()
    for rnd in range(rounds):
        run_load_round(srv, one, rnd)
        rss.append(srv.memory_kb("VmRSS"))
    m = srv.metrics()
    assert m["qevict_queue_length"] == 0 and m['qevict_kv_resident_bytes{tier="fp16"}'] == 0, m
    print("    soak: %d rounds x 8 streaming clients in %.1f s; VmRSS after rounds 5 and %d: "
          "%d, %d kB" % (rounds, time.time() - start, rounds, rss[4], rss[-1]))
    if args.sanitized:
        print("    (sanitized build: RSS growth not checked, ASan's quarantine grows by design)")
    else:
        assert rss[-1] <= rss[4] * 1.10, "resident memory grew from %d to %d kB" % (rss[4], rss[-1])


def test_routed_requests_do_not_grow_rss(srv, args):
    """Compressed requests one after another: every cache's memory goes back, so the process's
    resident memory after the 8th is that after the 4th (tolerance 4 MiB: allocator noise), and
    each response reports what its cache kept mapped next to its ledger and the process RSS."""
    policies = ["qevict", "snapkv", "h2o", "mikv"]
    rss = []
    # Under ASan the RSS is not checked (its quarantine grows by design): a few requests check
    # the reported bytes without the cost of eight sanitized prefills.
    requests = 4 if args.sanitized else 8
    for i in range(requests):
        facts = " ".join("Locker %d holds item %d." % (j, (i * 131 + j * 17) % 997)
                         for j in range(40))
        status, body = srv.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": facts + " What does locker 7 hold?"}],
            "max_tokens": 8, "temperature": 0, "cache_prompt": False,  # nothing kept: no growth
            "kv": {"policy": policies[i % len(policies)], "budget": 0.2}})
        assert status == 200, body
        kv = body["kv"]
        assert kv["routing_steps"] >= 1, kv
        allowed = max(kv["budget_bytes"], kv["floor_bytes"])
        assert kv["resident_bytes"] <= allowed, kv
        assert kv["resident_bytes"] <= kv["reserved_bytes"] <= 1.25 * allowed + 2**20, kv
        assert kv["rss_bytes"] > 0 and kv["peak_rss_bytes"] >= kv["rss_bytes"], kv
        rss.append(srv.memory_kb("VmRSS"))
    if args.sanitized:
        print("    (sanitized build: RSS growth not checked, ASan's quarantine grows by design)")
    else:
        print("    VmRSS after requests 4, 6, 8: %s kB" % [rss[k] for k in (3, 5, 7)])
        assert rss[7] <= rss[3] + 4096, "resident memory grew from %d to %d kB" % (rss[3], rss[7])


# ---- llama.cpp and OpenAI habits -----------------------------------------------------------------

def test_tokenize_and_detokenize(srv, args):
    status, body = srv.post("/tokenize", {"content": "The capital of France is Paris."})
    assert status == 200, body
    tokens = body["tokens"]
    assert tokens and all(isinstance(t, int) for t in tokens), body
    status, back = srv.post("/detokenize", {"tokens": tokens})
    assert status == 200 and back["content"] == "The capital of France is Paris.", back
    status, special = srv.post("/tokenize", {"content": "hi", "add_special": True})
    assert status == 200, special
    expect_error(srv.post("/tokenize", {"text": "hi"}), 400, param="content")
    expect_error(srv.post("/detokenize", {"tokens": [10**9]}), 400, param="tokens[0]")


def test_penalties_and_logit_bias_change_the_output(srv, args):
    base = {"prompt": "The capital of France is", "max_tokens": 6, "temperature": 0}
    status, plain = srv.post("/v1/completions", base)
    assert status == 200, plain
    first = srv.post("/tokenize", {"content": plain["choices"][0]["text"]})[1]["tokens"][0]
    status, banned = srv.post("/v1/completions", dict(base, logit_bias={str(first): -100}))
    assert status == 200, banned
    first_banned = srv.post("/tokenize", {"content": banned["choices"][0]["text"]})[1]["tokens"]
    assert first_banned and first_banned[0] != first, (plain, banned)
    bang = srv.post("/tokenize", {"content": "!"})[1]["tokens"][-1]
    status, forced = srv.post("/v1/completions", dict(base, logit_bias={str(bang): 100}))
    assert status == 200 and forced["choices"][0]["text"] == "!" * 6, forced
    # A frequency penalty that grows with each use stops the forced token from repeating forever
    # only if it outweighs the bias; +100 always wins: the penalty is applied, not rejected.
    status, _ = srv.post("/v1/completions", dict(base, frequency_penalty=2, presence_penalty=2))
    assert status == 200


def test_logprobs(srv, args):
    r = srv.client().chat.completions.create(model="any", messages=CAPITAL, max_tokens=8,
                                             temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens, (len(content), r.usage)
    assert "".join(t.token for t in content).startswith(r.choices[0].message.content.strip()[:3])
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3, t
        # Greedy: the chosen token is the most likely one.
        assert abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6, t
        assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob
    status, body = srv.post("/v1/completions", {"prompt": "The capital of France is",
                                                "max_tokens": 4, "temperature": 0, "logprobs": 2})
    assert status == 200, body
    lp = body["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 4, lp
    assert all(len(alternatives) <= 2 for alternatives in lp["top_logprobs"]), lp
    assert "".join(lp["tokens"]) == body["choices"][0]["text"], lp
    status, plain = srv.post("/v1/completions", {"prompt": "Hi", "max_tokens": 2})
    assert plain["choices"][0]["logprobs"] is None, plain


def stream_events(srv, path, payload):
    """The JSON payloads of a streamed response, [DONE] excluded."""
    req = urllib.request.Request(srv.url(path), data=json.dumps(dict(payload, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    events = []
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            line = line.strip()
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                events.append(json.loads(line[len(b"data: "):]))
    return events


def chat_entries(logprobs):
    return logprobs["content"] if logprobs else []


def completion_entries(logprobs):
    """Completions' parallel arrays as one entry per token."""
    if not logprobs:
        return []
    return [{"token": t, "logprob": lp, "top_logprobs": top, "text_offset": off}
            for t, lp, top, off in zip(logprobs["tokens"], logprobs["token_logprobs"],
                                       logprobs["top_logprobs"], logprobs["text_offset"])]


def check_streamed_logprobs(srv, path, payload, text_of, entries_of, token_bytes):
    """Streams `payload` and checks its logprobs against the whole response: the same entries,
    each sent with the chunk that releases the end of its text. Returns the whole body."""
    status, whole = srv.post(path, payload)
    assert status == 200, whole
    events = stream_events(srv, path, payload)
    choices = [e["choices"][0] for e in events if e.get("choices")]
    streamed, released_text, released_tokens = [], b"", b""
    finish = [c for c in choices if c["finish_reason"]]
    assert len(finish) == 1 and finish[0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert finish[0]["logprobs"] is None, finish[0]  # nothing left for the finish chunk
    whole_entries = entries_of(whole["choices"][0]["logprobs"])
    text_chunks = [c for c in choices if not c["finish_reason"]]
    for i, c in enumerate(text_chunks):
        entries = entries_of(c["logprobs"])
        streamed += entries
        released_text += (text_of(c) or "").encode()
        released_tokens += b"".join(token_bytes(e) for e in entries)
        if i + 1 < len(text_chunks) or finish[0]["finish_reason"] == "length":
            # Not early: every token sent has all its text out; not late: the next one has not.
            assert released_text.startswith(released_tokens), (released_text, released_tokens)
            if len(streamed) < len(whole_entries):
                following = token_bytes(whole_entries[len(streamed)])
                assert not following or \
                    not released_text.startswith(released_tokens + following), (c, following)
    assert streamed == whole_entries, (streamed, whole_entries)
    assert released_text.decode() == text_of(whole["choices"][0]), (released_text, whole)
    return whole


def test_logprobs_stream_with_their_chunks(srv, args):
    """Streamed logprobs come chunk by chunk and add up to the non-streamed ones, also when a
    stop string cuts a token in two: that token is sent with the last chunk, the stop string's
    other tokens are not sent at all."""
    chat = {"messages": CAPITAL, "max_tokens": 12, "temperature": 0, "logprobs": True,
            "top_logprobs": 2, "cache_prompt": False}
    completion = {"prompt": "The first five planets from the sun are", "max_tokens": 16,
                  "temperature": 0, "logprobs": 2, "cache_prompt": False}
    chat_text = lambda c: c["message"]["content"] if "message" in c else c["delta"].get("content")
    chat_bytes = lambda e: bytes(e["bytes"])
    completion_bytes = lambda e: e["token"].encode()
    for path, payload, text_of, entries_of, token_bytes in (
            ("/v1/chat/completions", chat, chat_text, chat_entries, chat_bytes),
            ("/v1/completions", completion, lambda c: c["text"], completion_entries,
             completion_bytes)):
        whole = check_streamed_logprobs(srv, path, payload, text_of, entries_of, token_bytes)
        entries = entries_of(whole["choices"][0]["logprobs"])
        assert len(entries) == whole["usage"]["completion_tokens"], (entries, whole["usage"])
        # A stop string that begins one byte into an ASCII token of two bytes or more and
        # reaches into the next token.
        pieces = [token_bytes(e) for e in entries]
        full = b"".join(pieces)
        cut = None
        for j in range(1, len(pieces) - 1):
            start = sum(len(p) for p in pieces[:j]) + 1
            stop = full[start:start + len(pieces[j]) + 1]
            if len(pieces[j]) >= 2 and pieces[j].isascii() and stop.isascii() and \
                    full.find(stop) == start:
                cut = (j, start, stop.decode())
                break
        assert cut is not None, "no stop string candidate in %r" % full
        j, start, stop = cut
        stopped = check_streamed_logprobs(srv, path, dict(payload, stop=stop), text_of,
                                          entries_of, token_bytes)
        assert text_of(stopped["choices"][0]).encode() == full[:start], (stopped, stop)
        assert stopped["choices"][0]["finish_reason"] == "stop", stopped
        # The cut token is the last one listed; the rest of the stop string's are not.
        assert entries_of(stopped["choices"][0]["logprobs"]) == entries[:j + 1], (stopped, stop)
        assert stopped["usage"]["completion_tokens"] > j + 1, stopped["usage"]


def test_budget_without_max_tokens_counts_prompt_plus_128(srv, args):
    """A chat request may generate to the end of the context, but its budget fraction counts the
    prompt and 128 new tokens, as `qevict run`'s default -n does."""
    facts = " ".join("Locker %d holds item %d." % (j, (j * 17) % 997) for j in range(60))
    status, body = srv.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": facts + " What does locker 7 hold?"}],
        "temperature": 0, "kv": {"policy": "qevict", "budget": 0.1}, "cache_prompt": False})
    assert status == 200, body
    kv, prompt = body["kv"], body["usage"]["prompt_tokens"]
    per_token = kv["full_fp16_bytes"] // kv["tokens_seen"]
    assert abs(kv["budget_bytes"] - int(0.1 * (prompt + 128) * per_token)) <= 1, (kv, prompt)


def test_api_key(args):
    srv = ServerProcess(args.binary, args.model, "-t", "2", "--api-key", "sesame")
    try:
        assert srv.get("/health")[0] == 200
        status, body = srv.get("/v1/models")
        assert status == 401 and body and json.loads(body)["error"]["code"] == "invalid_api_key"
        # The web page holds no data and asks for the key itself; what it calls wants the key.
        assert srv.get("/")[0] == 200 and srv.get("/web/app.js")[0] == 200
        for path in ("/props", "/v1/sessions/any/cache"):
            status, body = srv.get(path)
            assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key", path
        expect_error(curl(srv, "/v1/completions", "-d", '{"prompt": "hi", "max_tokens": 1}',
                          "-H", "Authorization: Bearer wrong"), 401, code="invalid_api_key")
        client = OpenAI(base_url=srv.url("/v1"), api_key="sesame", max_retries=0, timeout=120)
        r = client.completions.create(model="any", prompt="Hello", max_tokens=2, temperature=0)
        assert r.usage.completion_tokens >= 1, r
    finally:
        rc = srv.stop()
    assert rc == 0, "server exit code %d: %s" % (rc, srv.stderr()[-2000:])
    srv.remove_log()


# ---- kept sessions: conversations that continue from their compressed cache --------------------

def parcel_document(offset=0, chars=3000):
    """Facts about parcels on shelves (~1100 tokens at 3000 characters)."""
    text, i = "", 0
    while len(text) < chars:
        text += "Entry %d: the parcel marked %d was stored on shelf %d. " % (
            i, 500 + 41 * i + offset, (i + offset) % 7)
        i += 1
    return text


QUESTIONS = ["Which shelf holds the parcel marked 664?",
             "And which shelf holds the parcel marked 1033?",
             "What was stored on shelf 0 first?"]
KV_SESSION = {"policy": "qevict", "budget": 0.1}


def converse(srv, document, questions, max_tokens=24, session_id=None, kv=KV_SESSION,
             cache_prompt=True):
    """One conversation, a request per question; returns [(answer, usage)]."""
    messages, out = [], []
    for k, question in enumerate(questions):
        content = document + "\n\n" + question if k == 0 else question
        messages.append({"role": "user", "content": content})
        payload = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "kv": kv,
                   "cache_prompt": cache_prompt}
        if session_id is not None:
            payload["session_id"] = session_id
        status, body = srv.post("/v1/chat/completions", payload)
        assert status == 200, body
        answer = body["choices"][0]["message"]["content"]
        messages.append({"role": "assistant", "content": answer})
        out.append((answer, body["usage"]))
    return out


def session_cache(srv, session_id):
    status, body = srv.get("/v1/sessions/%s/cache" % session_id)
    assert status == 200, body
    return json.loads(body)


def test_session_cache_endpoint(srv, args):
    """GET /v1/sessions/{id}/cache: a kept conversation's windows per tier and its bytes, after
    each turn; 404 for a name not kept, 400 for an invalid one."""
    sid = "cache-%d" % time.time_ns()
    status, body = srv.get("/v1/sessions/%s/cache" % sid)
    assert status == 404 and json.loads(body)["error"]["code"] == "session_not_found", body
    assert srv.get("/v1/sessions/bad%20id/cache")[0] == 400
    document = parcel_document(chars=1500)
    kv = {"policy": "qevict", "budget": 0.2}
    turns = converse(srv, document, QUESTIONS[:1], session_id=sid, kv=kv)
    first = session_cache(srv, sid)
    turns += converse(srv, document, QUESTIONS[:2], session_id=sid, kv=kv)[1:]
    second = session_cache(srv, sid)
    assert turns[1][1]["prompt_tokens_details"]["cached_tokens"] == first["tokens"], turns
    for report, (_, usage) in ((first, turns[0]), (second, turns[1])):
        assert report["object"] == "session.cache" and report["id"] == sid
        assert report["policy"] == "qevict", report["policy"]
        # The kept tokens: the prompt and the generated ones that went through the model.
        assert usage["prompt_tokens"] < report["tokens"] <= (
            usage["prompt_tokens"] + usage["completion_tokens"]), (report["tokens"], usage)
        tiers, b = report["tiers"], report["bytes"]
        assert tiers["tiered"] and tiers["layers"] == 30 and tiers["bits"] == 2, tiers["layers"]
        assert len(tiers["by_layer"]) == tiers["layers"]
        windows = tiers["windows"]
        # Every token after the sinks is in a window (the last one may be filling).
        assert tiers["sink_tokens"] + sum(w["n_tokens"] for w in windows) == report["tokens"]
        for k, w in enumerate(windows):
            assert w["fp16"] + w["quant"] + w["evicted"] == tiers["layers"], w
            assert w["first_token"] == tiers["sink_tokens"] + k * tiers["window"], w
            assert [layer[k] for layer in tiers["by_layer"]].count("0") == w["fp16"], w
        assert any(w["quant"] for w in windows) and any(w["evicted"] for w in windows)
        assert b["resident"] == b["fp16"] + b["quant"] + b["meta"], b
        assert 0 < b["resident"] <= b["reserved"] and b["reserved"] == report["kept_bytes"], b
        assert b["budget"] > 0 and b["floor"] > 0 and b["cold"] == 0, b
        assert b["process_rss"] > b["reserved"], b
    assert len(second["tiers"]["windows"]) > len(first["tiers"]["windows"])
    moves = second["moves"]
    assert moves["evictions"] >= first["moves"]["evictions"] > 0, (first["moves"], moves)


def test_cold_tier_session(srv, args):
    """A kept conversation with qevict-recall: what leaves RAM is on disk (cold windows, none
    evicted), the cache endpoint and the kv object say so, and the next question continues from
    the kept cache within the budget."""
    sid = "cold-%d" % time.time_ns()
    document = parcel_document(chars=3000)
    kv = {"policy": "qevict-recall", "budget": 0.2}
    messages = [{"role": "user", "content": document + "\n\n" + QUESTIONS[0]}]
    kvs, reports = [], []
    for question in QUESTIONS[1:3]:
        status, body = srv.post("/v1/chat/completions",
                                {"messages": messages, "max_tokens": 16, "temperature": 0,
                                 "kv": kv, "session_id": sid})
        assert status == 200, body
        kvs.append(body["kv"])
        reports.append(session_cache(srv, sid))
        messages += [{"role": "assistant", "content": body["choices"][0]["message"]["content"]},
                     {"role": "user", "content": question}]
        last_usage = body["usage"]
    assert last_usage["prompt_tokens_details"]["cached_tokens"] == reports[0]["tokens"], last_usage
    for k, report in zip(kvs, reports):
        assert report["policy"] == "qevict-recall"
        assert not k["infeasible"], k
        assert k["cold_windows"] > 0 and k["evicted_windows"] == 0, k
        assert k["cold_bytes"] > 0 and k["cold_written_bytes"] >= k["cold_bytes"], k
        assert k["resident_bytes"] <= k["budget_bytes"], k
        windows = report["tiers"]["windows"]
        assert sum(w["cold"] for w in windows) == k["cold_windows"], k
        assert all(w["evicted"] == 0 for w in windows)
        assert report["bytes"]["cold"] == k["cold_bytes"], report["bytes"]


def open_cold_files(pid, directory):
    """The unlinked files the process holds open in `directory` (its sessions' cold files)."""
    count = 0
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:  # closed meanwhile
            continue
        count += target.startswith(directory + "/") and target.endswith(" (deleted)")
    return count


def check_stopped_leaving_no_cold_file(srv, rc, cold):
    """The stopped server exited with 0 and left nothing in its --kv-cold-dir."""
    assert rc == 0, "server exit code %d: %s" % (rc, srv.stderr()[-2000:])
    assert os.listdir(cold) == [], os.listdir(cold)
    os.rmdir(cold)
    srv.remove_log()


def test_cold_store_fault_drops_only_its_session(args):
    """--kv-cold-disk-limit caps each session's cold file: a conversation whose cold tier would
    pass it gets 507 cold_store_full naming the file and the way out, and is dropped with its
    cold file closed (the process's open "(deleted)" files in --kv-cold-dir, counted through
    /proc), as is one that meets it while it generates (the error then in the 200's body); a
    kept conversation goes on from its cache and answers as the same conversation does
    afresh, and one dropped by --max-sessions closes its file too. Nothing is ever left in the
    directory."""
    cold = tempfile.mkdtemp(prefix="qevict-cold-srv-")
    # A ~260-token conversation writes about 5 MiB of cold blocks at this budget, a ~1100-token
    # one about 24 MiB: the limit holds the first, not the second.
    srv = ServerProcess(args.binary, args.model, "--slots", "1", "-t", "2", "--max-sessions", "1",
                        "--kv-cold-dir", cold, "--kv-cold-disk-limit", str(8 * 2**20))
    kv = {"policy": "qevict-recall", "budget": 0.2}

    def ask(sid, messages):
        return srv.post("/v1/chat/completions", {"messages": messages, "max_tokens": 8,
                                                 "temperature": 0, "kv": kv, "session_id": sid})

    def two_turns(sid):
        messages = [{"role": "user", "content": parcel_document(chars=600) + "\n\n" +
                     QUESTIONS[0]}]
        bodies = []
        for question in QUESTIONS[1:3]:
            status, body = ask(sid, messages)
            assert status == 200, body
            assert open_cold_files(srv.proc.pid, cold) == 1, os.listdir("/proc/%d/fd" % srv.proc.pid)
            bodies.append(body)
            if len(bodies) == 1:
                messages += [{"role": "assistant",
                              "content": body["choices"][0]["message"]["content"]},
                             {"role": "user", "content": question}]
                yield bodies[0]
        yield bodies[1]
    try:
        first = two_turns("kept")
        kept_turn1 = next(first)
        assert kept_turn1["kv"]["cold_windows"] > 0, kept_turn1["kv"]
        # The long conversation fails at its prompt's end, before any byte of the response.
        long_messages = [{"role": "user", "content": parcel_document(offset=5, chars=3000) +
                          "\n\n" + QUESTIONS[0]}]
        result = ask("too-long", long_messages)
        expect_error(result, 507, code="cold_store_full", contains="--kv-cold-disk-limit")
        message = result[1]["error"]["message"]
        for part in (cold + "/qevict-cold-", "(unlinked)", "8.0 MiB", "session was dropped"):
            assert part in message, (part, message)
        assert result[1]["error"]["type"] == "server_error", result[1]
        assert open_cold_files(srv.proc.pid, cold) == 1  # its file closed, the kept one open
        assert srv.get("/v1/sessions/too-long/cache")[0] == 404
        # One that meets the limit while it generates: its prompt leaves ~7.4 MiB cold, each 8
        # generated tokens ~0.2 MiB more (end of text ruled out). The 200 has gone out, so the
        # error object is the body.
        status, body = srv.post("/v1/completions", {
            "prompt": parcel_document(offset=9, chars=1050), "max_tokens": 128, "temperature": 0,
            "logit_bias": {"0": -100, "1": -100, "2": -100},
            "kv": {"policy": "qevict-recall", "budget": 0.05},
            "session_id": "generating"})
        assert status == 200 and "error" in body, body
        assert body["error"]["code"] == "cold_store_full", body
        assert body["error"]["message"].startswith("generation failed: "), body
        assert open_cold_files(srv.proc.pid, cold) == 1
        assert srv.get("/v1/sessions/generating/cache")[0] == 404
        # The kept conversation goes on from its cache.
        kept_turn2 = next(first)
        assert kept_turn2["usage"]["prompt_tokens_details"]["cached_tokens"] > 0, kept_turn2
        # The same conversation afresh (dropping the kept one: --max-sessions 1, its file
        # closed) answers the same.
        again = two_turns("again")
        next(again)
        assert srv.get("/v1/sessions/kept/cache")[0] == 404
        again_turn2 = next(again)
        assert (again_turn2["choices"][0]["message"]["content"] ==
                kept_turn2["choices"][0]["message"]["content"]), (again_turn2, kept_turn2)
        assert os.listdir(cold) == [], os.listdir(cold)
    finally:
        rc = srv.stop()
    check_stopped_leaving_no_cold_file(srv, rc, cold)


def test_sessions_continue_like_one_process(srv, args):
    """Three turns over one document: every later request reuses everything the previous one
    left in the cache (its prompt and its answer), and the answers are those of `qevict chat`,
    one process that never stopped."""
    before = srv.metrics()
    turns = converse(srv, parcel_document(), QUESTIONS)
    for k in range(1, len(turns)):
        prev, usage = turns[k - 1][1], turns[k][1]
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        assert cached >= prev["prompt_tokens"] + prev["completion_tokens"] - 1, (k, prev, usage)
        assert cached >= 0.8 * prev["prompt_tokens"], (k, prev, usage)
    assert turns[0][1]["prompt_tokens_details"]["cached_tokens"] == 0, turns[0]
    m = srv.metrics()
    assert m["qevict_session_hits_total"] - before["qevict_session_hits_total"] == 2, m
    reused = sum(u["prompt_tokens_details"]["cached_tokens"] for _, u in turns)
    assert (m["qevict_session_reused_tokens_total"] -
            before["qevict_session_reused_tokens_total"]) == reused, m
    assert m["qevict_sessions_kept"] >= 1 and m["qevict_sessions_kept_bytes"] > 0, m

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as doc:
        doc.write(parcel_document())
    try:
        # The server's slots compute on one thread each (-t 2 over 2 slots): so does the reference.
        chat = subprocess.run(
            [args.binary, "chat", "-m", args.model, "-f", doc.name, "--temp", "0", "-n", "24",
             "-t", "1", "--kv-policy", KV_SESSION["policy"], "--kv-budget",
             str(KV_SESSION["budget"])],
            input="\n".join(QUESTIONS) + "\n", capture_output=True, text=True, timeout=900)
    finally:
        os.unlink(doc.name)
    assert chat.returncode == 0, chat.stderr[-2000:]
    # `qevict chat` ends each answer with a line "---".
    assert chat.stdout == "".join(answer + "\n---\n" for answer, _ in turns), (chat.stdout, turns)
    status = re.findall(r"\[turn (\d+)\] prompt (\d+) tokens \((\d+) reused", chat.stderr)
    assert [int(t[1]) for t in status] == [u["prompt_tokens"] for _, u in turns], chat.stderr
    assert [int(t[2]) for t in status] == [u["prompt_tokens_details"]["cached_tokens"]
                                           for _, u in turns], chat.stderr


def test_sessions_divergent_history_never_reuses(srv, args):
    document = parcel_document(offset=3, chars=1800)  # ~650 tokens: 0.1 of them above the floor
    first = converse(srv, document, QUESTIONS[:1])
    answer = first[0][0]
    edited_doc = document.replace("shelf 4.", "shelf 5.", 1)
    assert edited_doc != document
    variants = {
        "edited document": [{"role": "user", "content": edited_doc + "\n\n" + QUESTIONS[0]},
                            {"role": "assistant", "content": answer},
                            {"role": "user", "content": QUESTIONS[1]}],
        "edited answer": [{"role": "user", "content": document + "\n\n" + QUESTIONS[0]},
                          {"role": "assistant", "content": "Honestly, " + answer},
                          {"role": "user", "content": QUESTIONS[1]}],
    }
    for name, messages in variants.items():
        payload = {"messages": messages, "max_tokens": 16, "temperature": 0, "kv": KV_SESSION}
        status, reused = srv.post("/v1/chat/completions", payload)
        assert status == 200, reused
        assert reused["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, (name, reused)
        status, fresh = srv.post("/v1/chat/completions", dict(payload, cache_prompt=False))
        assert status == 200, fresh
        assert (reused["choices"][0]["message"]["content"] ==
                fresh["choices"][0]["message"]["content"]), name
    # (An answer with text appended is not a divergence: the kept tokens still prefix the prompt.)
    # A named conversation that diverges is dropped, and the request starts afresh.
    before = srv.metrics()
    converse(srv, document, QUESTIONS[:1], session_id="divergent-1")
    status, body = srv.post("/v1/chat/completions", {
        "messages": variants["edited answer"], "max_tokens": 8, "temperature": 0,
        "kv": KV_SESSION, "session_id": "divergent-1"})
    assert status == 200, body
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, body
    after = srv.metrics()
    assert (after['qevict_sessions_dropped_total{reason="diverged"}'] >
            before['qevict_sessions_dropped_total{reason="diverged"}']), after
    # The same conversation under another kv budget is another cache: never reused.
    status, body = srv.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": document + "\n\n" + QUESTIONS[0]},
                     {"role": "assistant", "content": answer},
                     {"role": "user", "content": QUESTIONS[1]}],
        "max_tokens": 8, "temperature": 0, "kv": {"policy": "qevict", "budget": 0.2}})
    assert status == 200, body
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, body


def test_sessions_concurrent_conversations_are_isolated(srv, args):
    """Two named conversations on two documents, run one after the other, then at the same time
    on the two slots: the same answers and the same reuse either way."""
    docs = {"a": parcel_document(offset=5, chars=1500), "b": parcel_document(offset=11, chars=1500)}
    alone = {k: converse(srv, d, QUESTIONS[:2], max_tokens=16, session_id="alone-" + k)
             for k, d in docs.items()}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {k: pool.submit(converse, srv, d, QUESTIONS[:2], 16, "together-" + k)
                   for k, d in docs.items()}
        together = {k: f.result(timeout=600) for k, f in futures.items()}
    for k in docs:
        assert [a for a, _ in together[k]] == [a for a, _ in alone[k]], (k, together[k], alone[k])
        assert ([u["prompt_tokens_details"]["cached_tokens"] for _, u in together[k]] ==
                [u["prompt_tokens_details"]["cached_tokens"] for _, u in alone[k]]), k
        assert together[k][1][1]["prompt_tokens_details"]["cached_tokens"] > 0, together[k]


def test_sessions_come_and_go_under_the_memory_limit(args):
    """14 two-turn conversations from two clients on a server whose KV memory limit holds only a
    few kept conversations: kept and running bytes stay under the limit in every scrape, least
    recently used conversations make room, and resident memory stays bounded."""
    # Two running requests reserve ~11 MB each (admission control's bound for a ~270-token
    # conversation plus 8 new tokens); a kept one holds ~1.4 MB: the limit leaves room for about
    # four kept conversations, so the fifth one finished makes the first drop.
    limit = 28 * 2**20
    srv = ServerProcess(args.binary, args.model, "--slots", "2", "-t", "2", "--queue", "8",
                        "--kv-memory-limit", str(limit), "--max-sessions", "64")
    samples = []
    stop = threading.Event()

    def scrape():
        while not stop.is_set():
            m = srv.metrics()
            samples.append(m["qevict_kv_reserved_bytes"] + m["qevict_sessions_kept_bytes"])
            # Under ASan every scrape costs the server several times more: scrape less often.
            time.sleep(0.1 if args.sanitized else 0.02)
    try:
        # The weights are paged in by a first request; memory is counted from there.
        converse(srv, parcel_document(offset=99, chars=1200), QUESTIONS[:1], max_tokens=8,
                 cache_prompt=False)
        rss_start = srv.memory_kb("VmRSS")
        scraper = threading.Thread(target=scrape)
        scraper.start()

        def conversation(i):
            return converse(srv, parcel_document(offset=i, chars=1200), QUESTIONS[:2],
                            max_tokens=8)
        # Drops start after about four conversations: 14 make ten of them (the Release run;
        # about 16 s on a 2-core 2 GHz machine); under ASan, where each prefill is several
        # times slower, 8 make four.
        count = 8 if args.sanitized else 14
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(conversation, range(count)))
        stop.set()
        scraper.join()
        hits = sum(1 for turns in results
                   if turns[1][1]["prompt_tokens_details"]["cached_tokens"] > 0)
        m = srv.metrics()
        assert len(samples) > 10, len(samples)
        assert max(samples) <= limit, (max(samples), limit)
        assert m['qevict_sessions_dropped_total{reason="memory"}'] > 0, m
        assert m["qevict_sessions_kept_bytes"] <= limit, m
        assert hits >= 0.8 * count, "only %d of %d second turns continued" % (hits, count)
        rss_end = srv.memory_kb("VmRSS")
        print("    %d of %d second turns reused; %d kept conversations dropped for memory; peak "
              "kept+reserved %.1f MiB of %.1f; VmRSS %d -> %d kB"
              % (hits, count, m['qevict_sessions_dropped_total{reason="memory"}'],
                 max(samples) / 2**20, limit / 2**20, rss_start, rss_end))
        if not args.sanitized:
            assert rss_end <= rss_start + limit // 1024 + 32 * 1024, (rss_start, rss_end)
    finally:
        stop.set()
        rc = srv.stop()
    assert rc == 0, "server exit code %d: %s" % (rc, srv.stderr()[-2000:])
    srv.remove_log()


def test_sessions_bounded_by_count_and_ttl(args):
    """--max-sessions drops the least recently used conversation; --session-ttl the idle ones."""
    # The ttl must outlast three conversations: about 1 s each in Release, 6 s under ASan.
    ttl = 40 if args.sanitized else 10
    srv = ServerProcess(args.binary, args.model, "--slots", "1", "-t", "2",
                        "--max-sessions", "2", "--session-ttl", str(ttl))
    try:
        docs = [parcel_document(offset=40 + i, chars=600) for i in range(3)]
        firsts = [converse(srv, d, QUESTIONS[:1], max_tokens=8) for d in docs]
        m = srv.metrics()
        assert m["qevict_sessions_kept"] == 2, m
        assert m['qevict_sessions_dropped_total{reason="lru"}'] == 1, m
        assert m['qevict_sessions_dropped_total{reason="ttl"}'] == 0, m

        def second_turn(i):
            messages = [{"role": "user", "content": docs[i] + "\n\n" + QUESTIONS[0]},
                        {"role": "assistant", "content": firsts[i][0][0]},
                        {"role": "user", "content": QUESTIONS[1]}]
            status, body = srv.post("/v1/chat/completions", {
                "messages": messages, "max_tokens": 4, "temperature": 0, "kv": KV_SESSION})
            assert status == 200, body
            return body["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert second_turn(0) == 0  # the oldest was dropped
        assert second_turn(2) > 0   # the newest is kept
        time.sleep(ttl + 1)
        assert second_turn(1) == 0  # idle past the ttl
        m = srv.metrics()
        assert m['qevict_sessions_dropped_total{reason="ttl"}'] >= 1, m
    finally:
        rc = srv.stop()
    assert rc == 0, "server exit code %d: %s" % (rc, srv.stderr()[-2000:])
    srv.remove_log()


# ---- admission control on a server with a small KV memory limit -------------------------------

def test_admission_control(args):
    limit = 2500000  # a streaming cache at its floor maps ~1.7 MB (floor + one slab per pool)
    srv = ServerProcess(args.binary, args.model, "--slots", "2", "-t", "2", "--queue", "1",
                        "--kv-memory-limit", str(limit))
    try:
        # Bytes per token from a tiny full-cache run.
        status, tiny = srv.post("/v1/completions", {"prompt": "hello", "max_tokens": 1})
        assert status == 200, tiny
        per_token = tiny["kv"]["full_fp16_bytes"] // tiny["kv"]["tokens_seen"]
        prompt_tokens = tiny["usage"]["prompt_tokens"]

        # Larger than the whole limit: rejected at once, naming the numbers.
        too_big = limit // per_token + 10
        expect_error(curl(srv, "/v1/completions", "-d", json.dumps(
            {"prompt": "hello", "max_tokens": too_big})), 400,
            code="kv_memory_limit_exceeded", contains=str(limit))

        # A long stream holds most of the memory (a streaming cache at its fp16 floor).
        holder = open_stream(srv, "/v1/completions",
                             {"prompt": "Once upon a time", "max_tokens": 4000, "stream": True,
                              "kv": {"policy": "streaming", "budget_bytes": 600000}})
        reserved = srv.metrics()["qevict_kv_reserved_bytes"]
        assert 0 < reserved <= limit, reserved
        # A request that fits alone but not beside it waits although a slot is free...
        total = int((limit - reserved) // per_token) + 4
        assert total * per_token <= limit
        waiter = {}

        def wait_for_memory():
            waiter["result"] = srv.post("/v1/completions",
                                        {"prompt": "hello", "max_tokens": total - prompt_tokens})
        thread = threading.Thread(target=wait_for_memory)
        thread.start()
        wait_until(lambda: srv.metrics()["qevict_queue_length"] == 1, 30, "a queued request")
        m = srv.metrics()
        assert m["qevict_slots_active"] == 1, m["qevict_slots_active"]
        # ...and with the queue (1) full, the next one is turned away.
        expect_error(curl(srv, "/v1/completions", "-d", json.dumps(
            {"prompt": "hello", "max_tokens": total - prompt_tokens})), 503, code="queue_full")
        holder.close()
        thread.join(timeout=120)
        assert not thread.is_alive(), "the queued request never ran"
        status, body = waiter["result"]
        assert status == 200, body
        assert body["usage"]["completion_tokens"] >= 1, body
    finally:
        rc = srv.stop()
    assert rc == 0, "server exit code %d: %s" % (rc, srv.stderr()[-2000:])
    srv.remove_log()


def check_clean_shutdown(srv):
    rc = srv.stop()
    log = srv.stderr()
    assert rc == 0, "server exit code %d: %s" % (rc, log[-3000:])
    for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:", "internal check failed"):
        assert marker not in log, log[-3000:]


# The tests in three groups, each a CTest entry of its own (server_http_GROUP) so that they run
# beside each other: each group starts its own server for its tests that share one, then runs
# the ones that start servers with other flags.
def test_cold_disk_total_caps_every_conversation_together(args):
    """--kv-cold-disk-total caps the cold files of every conversation together (kept ones
    included). A running conversation whose cold tier would pass it closes idle kept ones first,
    least recently used first, as --kv-memory-limit does for RAM (dropped with reason
    "cold_disk", their files closed); one that passes it even so gets 507 cold_store_full naming
    the flag, and is dropped with its file."""
    cold = tempfile.mkdtemp(prefix="qevict-cold-total-")
    limit = 8 * 2**20
    srv = ServerProcess(args.binary, args.model, "--slots", "1", "-t", "2", "--max-sessions", "4",
                        "--kv-cold-dir", cold, "--kv-cold-disk-total", str(limit))
    kv = {"policy": "qevict-recall", "budget": 0.2}
    dropped = 'qevict_sessions_dropped_total{reason="cold_disk"}'

    def ask(sid, offset, chars=600):
        messages = [{"role": "user", "content": parcel_document(offset=offset, chars=chars) +
                     "\n\n" + QUESTIONS[0]}]
        return srv.post("/v1/chat/completions", {"messages": messages, "max_tokens": 8,
                                                 "temperature": 0, "kv": kv, "session_id": sid})
    try:
        status, first = ask("first", 0)
        assert status == 200, first
        # The premise: one such conversation fits under the limit, two do not.
        assert limit / 2 < first["kv"]["cold_bytes"] <= limit, first["kv"]
        assert open_cold_files(srv.proc.pid, cold) == 1
        m = srv.metrics()
        assert m["qevict_kv_cold_disk_total_bytes"] == limit, m
        assert m["qevict_kv_cold_disk_bytes"] == first["kv"]["cold_bytes"], m  # kept, not running
        assert m[dropped] == 0, m
        # The second needs the first's room: the idle first is closed, the second answers.
        status, second = ask("second", 3)
        assert status == 200, second
        assert srv.get("/v1/sessions/first/cache")[0] == 404
        assert srv.get("/v1/sessions/second/cache")[0] == 200
        assert open_cold_files(srv.proc.pid, cold) == 1
        m = srv.metrics()
        assert m[dropped] == 1, m
        assert m["qevict_kv_cold_disk_bytes"] == second["kv"]["cold_bytes"], m
        # A conversation whose own cold tier passes the limit: the idle second is closed for it
        # and it still fails, with the flag named; nothing is left open.
        result = ask("third", 6, chars=2400)
        expect_error(result, 507, code="cold_store_full", contains="--kv-cold-disk-total")
        message = result[1]["error"]["message"]
        assert "8.0 MiB" in message and "idle kept conversations closed first" in message, message
        assert srv.get("/v1/sessions/second/cache")[0] == 404
        assert open_cold_files(srv.proc.pid, cold) == 0
        m = srv.metrics()
        assert m[dropped] == 2, m
        assert m["qevict_kv_cold_disk_bytes"] == 0, m
    finally:
        rc = srv.stop()
    check_stopped_leaving_no_cold_file(srv, rc, cold)

GROUPS = {
    # The API as clients see it: requests, streaming, errors, disconnects, llama.cpp and OpenAI
    # habits, admission control and the API key.
    "api": ([test_health_and_models, test_chat_non_streaming,
             test_chat_streaming_matches_non_streaming, test_completions,
             test_max_tokens_is_honoured, test_stop_strings, test_sampling_is_seeded,
             test_port_in_use_is_a_clean_error, test_openai_client_sees_errors,
             test_curl_error_cases, test_client_disconnect_mid_stream,
             test_client_disconnect_while_waiting_for_a_whole_response,
             test_tokenize_and_detokenize, test_penalties_and_logit_bias_change_the_output,
             test_logprobs, test_logprobs_stream_with_their_chunks,
             test_budget_without_max_tokens_counts_prompt_plus_128, test_request_log_line,
             test_web_page_is_served, test_metrics],
            [test_admission_control, test_api_key]),
    # Per-request KV policies and what the process keeps: the policy sweep, routed requests one
    # after another, concurrent streaming load.
    "kv": ([test_kv_policies, test_reconstruction_policies_score_and_match_run,
            test_routed_requests_do_not_grow_rss,
            test_load_8_streaming_clients], []),
    # `make test-long` only (CTest label `long`): the soak, many rounds of mixed load.
    "soak": ([test_soak_streaming_clients_and_sessions], []),
    # Conversations kept between requests.
    "sessions": ([test_session_cache_endpoint, test_cold_tier_session,
                  test_sessions_continue_like_one_process,
                  test_sessions_divergent_history_never_reuses,
                  test_sessions_concurrent_conversations_are_isolated],
                 [test_sessions_bounded_by_count_and_ttl,
                  test_sessions_come_and_go_under_the_memory_limit,
                  test_cold_store_fault_drops_only_its_session,
                  test_cold_disk_total_caps_every_conversation_together]),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--sanitized", action="store_true",
                        help="the binary is built with ASan: skip the RSS-growth check")
    parser.add_argument("--group", choices=sorted(GROUPS), action="append",
                        help="run this group of tests (repeatable; default: every group)")
    parser.add_argument("-k", default="", help="run only tests whose name contains this")
    args = parser.parse_args()

    # Under ASan (--sanitized) the tests that only repeat long prefills through code the others
    # run are left to the Release run: the policy sweep, the two long conversations, and the
    # 128-token default generation (under ASan beside the other groups it outlasted the client's
    # 120 s timeout on a 2-core machine).
    release_only = {"test_kv_policies", "test_sessions_continue_like_one_process",
                    "test_sessions_divergent_history_never_reuses",
                    "test_budget_without_max_tokens_counts_prompt_plus_128"}
    passed = failed = 0
    t0 = time.time()

    def run(name, fn):
        nonlocal passed, failed
        if args.k and args.k not in name:
            return
        if args.sanitized and name in release_only:
            print("--   %s (not under ASan: the Release run has it)" % name)
            return
        start = time.time()
        try:
            fn()
        except Exception:  # noqa: BLE001 (every failure is reported and counted)
            failed += 1
            print("FAIL %s (%.1f s)" % (name, time.time() - start))
            traceback.print_exc()
        else:
            passed += 1
            print("ok   %s (%.1f s)" % (name, time.time() - start))
        sys.stdout.flush()

    for group in args.group or sorted(GROUPS):
        on_main, standalone = GROUPS[group]
        print("group %s" % group)
        try:
            srv = ServerProcess(args.binary, args.model, "--slots", "2", "-t", "2", "--queue", "16",
                                "-v")  # -v: the request log (test_request_log_line)
        except Exception:  # noqa: BLE001
            srv = None
            failed += 1
            print("FAIL start_server")
            traceback.print_exc()
        if srv is not None:
            try:
                for test in on_main:
                    run(test.__name__, lambda test=test: test(srv, args))
            finally:
                run("clean_shutdown", lambda: check_clean_shutdown(srv))
                srv.stop()  # whatever ran (a no-op once stopped)
                srv.remove_log()
        for test in standalone:
            run(test.__name__, lambda test=test: test(args))
    print("server tests took %.1f s" % (time.time() - t0))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
