// The web page of `qevict serve`: a chat about a document, answers streamed from
// /v1/chat/completions, and after each turn the kept conversation's cache as a strip of windows
// coloured by tier (GET /v1/sessions/{id}/cache). Plain JS, no framework: served from the
// bytes compiled into the server.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "qevict-api-key";
const TIER_CLASS = ["fp16", "quant", "evicted", "cold"];  // by Tier (src/kv/routing.h)

const state = {
  apiKey: localStorage.getItem(KEY_STORAGE) || "",
  sessionId: "",
  history: [],      // chat messages sent so far (the document rides in the first user message)
  turn: 0,
  lastByLayer: null,  // the last turn's tiers per layer, to find the next turn's promotions
  previousByLayer: null,  // the turn's before, to redraw the last turn's promotions
  turnStarts: [],  // per turn, the first token it added (the tokens kept before it)
  lastReport: null,
  busy: false,
};

function newSessionId() {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function formatBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let v = n, u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return (u === 0 ? v.toString() : v.toFixed(v < 10 ? 2 : 1)) + " " + units[u];
}

function showError(text) {
  const el = $("error");
  el.textContent = text;
  el.hidden = !text;
}

function setBusy(busy) {
  state.busy = busy;
  document.body.dataset.busy = busy ? "1" : "0";
  $("send").disabled = busy;
  $("new-chat").disabled = busy;
  $("status").textContent = busy ? "generating…" : "";
}

// fetch with the API key; a 401 asks for the key once and tries again.
async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (state.apiKey) headers["Authorization"] = "Bearer " + state.apiKey;
  const res = await fetch(path, Object.assign({}, options, { headers }));
  if (res.status === 401 && !options.retried) {
    await askForKey();
    return api(path, Object.assign({}, options, { retried: true }));
  }
  return res;
}

function askForKey() {
  return new Promise((resolve) => {
    const dialog = $("key-dialog");
    $("key-input").value = state.apiKey;
    dialog.addEventListener("close", function onClose() {
      dialog.removeEventListener("close", onClose);
      state.apiKey = $("key-input").value.trim();
      localStorage.setItem(KEY_STORAGE, state.apiKey);
      resolve();
    });
    dialog.showModal();
  });
}

async function errorText(res) {
  try {
    const body = await res.json();
    if (body && body.error) return res.status + ": " + body.error.message;
  } catch (e) { /* not JSON */ }
  return "HTTP " + res.status;
}

async function loadProps() {
  const res = await api("/props");
  if (!res.ok) throw new Error(await errorText(res));
  const props = await res.json();
  $("model").textContent = props.model + " · context " + props.n_ctx + " tokens · " +
      props.total_slots + " slot(s)";
  const select = $("policy");
  select.innerHTML = "";
  for (const p of props.kv.policies) {
    const option = document.createElement("option");
    option.value = p.name;
    option.textContent = p.diagnostic ? p.name + " (diagnostic, not for use)" : p.name;
    option.title = p.description;
    select.appendChild(option);
  }
  // The server's default, unless it is `full` (nothing to see in the strip): then what the
  // README recommends for a document and several questions in little memory, qevict-recall.
  const preferred = props.kv.default_policy !== "full" ? props.kv.default_policy : "qevict-recall";
  if (props.kv.policies.some((p) => p.name === preferred)) select.value = preferred;
  if (props.kv.default_policy !== "full" && props.kv.default_budget < 1) {
    $("budget").value = props.kv.default_budget;
  }
  $("budget").min = 0.01;
  $("budget").max = props.kv.budget_range[1];
  select.dataset.descriptions = JSON.stringify(
      Object.fromEntries(props.kv.policies.map((p) => [p.name, p.description])));
  showPolicyHelp();
  if (!props.sessions) {
    showError("This server keeps no sessions (--max-sessions 0): each question reads the " +
              "document again and the cache picture is not available.");
  }
}

function showPolicyHelp() {
  const descriptions = JSON.parse($("policy").dataset.descriptions || "{}");
  $("policy-help").textContent = descriptions[$("policy").value] || "";
}

function kvSettings() {
  const policy = $("policy").value;
  if (policy === "full") return { policy };
  const budget = Number($("budget").value);
  if (!(budget > 0 && budget <= 1)) throw new Error("the budget must be in (0, 1]");
  return { policy, budget };
}

function addMessage(role, text) {
  const el = document.createElement("div");
  el.className = "msg " + role;
  const body = document.createElement("span");
  body.className = "text";
  body.textContent = text;
  el.appendChild(body);
  $("messages").appendChild(el);
  $("messages").scrollTop = $("messages").scrollHeight;
  return el;
}

function resetConversation() {
  state.sessionId = newSessionId();
  state.history = [];
  state.turn = 0;
  state.lastByLayer = null;
  state.previousByLayer = null;
  state.turnStarts = [];
  state.lastReport = null;
  $("messages").innerHTML = "";
  $("strip").innerHTML = "";
  $("strip").dataset.turn = "0";
  $("strip").dataset.signature = "";
  $("bytes").querySelector("tbody").innerHTML = "";
  $("turns").querySelector("tbody").innerHTML = "";
  $("turn-info").textContent = "";
  for (const el of [$("document"), $("doc-file"), $("policy"), $("budget"), $("max-tokens")]) {
    el.disabled = false;
  }
  showError("");
}

// The first question carries the document; later ones only the question.
function userMessage(question) {
  if (state.history.length > 0) return question;
  const doc = $("document").value.trim();
  return doc ? "Here is a document.\n\n" + doc + "\n\nQuestion: " + question : question;
}

// Reads the SSE stream of a chat completion; calls onDelta for each piece of text and returns
// {finish_reason, kv, usage}.
async function readStream(res, onDelta) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const out = { finish_reason: null, kv: null, usage: null };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return out;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.usage) out.usage = chunk.usage;
        const choice = chunk.choices && chunk.choices[0];
        if (!choice) continue;
        if (choice.delta && choice.delta.content) onDelta(choice.delta.content);
        if (choice.finish_reason) out.finish_reason = choice.finish_reason;
        if (chunk.kv) out.kv = chunk.kv;
      }
    }
  }
  return out;
}

async function ask(question) {
  showError("");
  const kv = kvSettings();
  const maxTokens = Math.max(1, parseInt($("max-tokens").value, 10) || 96);
  const content = userMessage(question);
  const messages = state.history.concat([{ role: "user", content }]);
  addMessage("user", question);
  const answerEl = addMessage("assistant", "");
  answerEl.dataset.state = "streaming";
  const textEl = answerEl.querySelector(".text");
  setBusy(true);
  try {
    const res = await api("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        messages, stream: true, stream_options: { include_usage: true },
        max_tokens: maxTokens, temperature: 0, session_id: state.sessionId, kv,
      }),
    });
    if (!res.ok) throw new Error(await errorText(res));
    let answer = "";
    const result = await readStream(res, (delta) => {
      answer += delta;
      textEl.textContent = answer;
      $("messages").scrollTop = $("messages").scrollHeight;
    });
    state.history = messages.concat([{ role: "assistant", content: answer }]);
    // Settings are fixed for the conversation: another policy or budget is another cache.
    for (const el of [$("document"), $("doc-file"), $("policy"), $("budget"), $("max-tokens")]) {
      el.disabled = true;
    }
    const stats = document.createElement("span");
    stats.className = "stats";
    const u = result.usage || {};
    const cached = u.prompt_tokens_details ? u.prompt_tokens_details.cached_tokens : 0;
    stats.textContent = "prompt " + u.prompt_tokens + " tokens (" + cached + " kept from " +
        "earlier turns) · " + u.completion_tokens + " generated · " + kv.policy +
        (result.kv ? " · resident " + formatBytes(result.kv.resident_bytes) : "") +
        " · " + result.finish_reason;
    answerEl.appendChild(stats);
    answerEl.dataset.state = "done";
    state.turn += 1;
    await showCache(u, cached);
  } catch (e) {
    answerEl.dataset.state = "error";
    showError(String(e.message || e));
  } finally {
    setBusy(false);
  }
}

// ---- the cache picture ----

function promotedWindows(byLayer, previous) {
  const promoted = new Set();
  if (!previous) return promoted;
  for (let l = 0; l < byLayer.length && l < previous.length; l++) {
    const now = byLayer[l], before = previous[l];
    for (let w = 0; w < now.length && w < before.length; w++) {
      if (now.charCodeAt(w) < before.charCodeAt(w)) promoted.add(w);
    }
  }
  return promoted;
}

function renderStrip(report) {
  const tiers = report.tiers;
  const strip = $("strip");
  strip.innerHTML = "";
  // Long conversations get narrower cells, so that the strip stays a few rows high.
  const n = tiers.windows.length;
  strip.className = n > 2000 ? "densest" : n > 400 ? "dense" : "";
  const layerChoice = $("layer-select").value;
  const promoted = promotedWindows(tiers.by_layer, state.lastByLayer);
  $("quant-label").textContent =
    tiers.bits + "-bit" + (tiers.quant_exact_on_disk ? " (fp16 original on disk)" : "");
  if (!tiers.tiered) {
    const cell = document.createElement("div");
    cell.className = "cell fp16";
    cell.style.width = "100%";
    cell.title = report.tokens + " tokens, all in fp16 (policy full has no windows)";
    strip.appendChild(cell);
    return promoted;
  }
  if (tiers.sink_tokens > 0) {
    const sink = document.createElement("div");
    sink.className = "cell fp16 sink";
    sink.title = "tokens 0-" + (tiers.sink_tokens - 1) + ": attention sinks, always fp16";
    strip.appendChild(sink);
  }
  tiers.windows.forEach((w, i) => {
    const cell = document.createElement("div");
    cell.className = "cell";
    cell.dataset.window = i;
    const total = w.fp16 + w.quant + w.evicted + (w.cold || 0);
    if (layerChoice === "all") {
      for (const [tier, count] of [["fp16", w.fp16], ["quant", w.quant], ["cold", w.cold || 0], ["evicted", w.evicted]]) {
        if (count === 0) continue;
        const part = document.createElement("i");
        part.className = tier;
        part.style.height = (100 * count / total) + "%";
        cell.appendChild(part);
      }
    } else {
      const code = tiers.by_layer[Number(layerChoice)].charCodeAt(i) - 48;
      cell.classList.add(TIER_CLASS[code] || "evicted");
    }
    if (promoted.has(i)) cell.classList.add("promoted");
    const turnStart = state.turnStarts.findIndex(
        (t) => t > 0 && t >= w.first_token && t < w.first_token + w.n_tokens);
    if (turnStart >= 0) cell.classList.add("turn-start");
    cell.title = "tokens " + w.first_token + "-" + (w.first_token + w.n_tokens - 1) + ": " +
        w.fp16 + " layers fp16, " + w.quant + " " + tiers.bits + "-bit, " +
        (w.cold ? w.cold + " cold (on disk, recallable), " : "") + w.evicted +
        " evicted; mean score " + w.mean_score.toPrecision(3) +
        (turnStart >= 0 ? "; turn " + (turnStart + 1) + " starts here" : "");
    strip.appendChild(cell);
  });
  return promoted;
}

// One bar, to scale: fp16 and quantized bytes resident, the reserved bytes behind them, the
// budget and the floor as marks.
function renderBytesBar(b) {
  const bar = $("bytes-bar");
  bar.innerHTML = "";
  const scale = Math.max(b.reserved, b.resident, b.budget || 0, b.floor || 0, 1);
  const pct = (x) => (100 * x / scale) + "%";
  const reserved = document.createElement("div");
  reserved.className = "reserved";
  reserved.style.width = pct(b.reserved);
  reserved.title = "reserved " + formatBytes(b.reserved);
  bar.appendChild(reserved);
  let left = 0;
  for (const [cls, bytes, name] of [["fp16", b.fp16, "fp16"], ["quant", b.quant, "quantized"],
                                    ["meta", b.meta, "metadata"]]) {
    const seg = document.createElement("div");
    seg.className = "seg " + cls;
    seg.style.left = pct(left);
    seg.style.width = pct(bytes);
    seg.title = name + " " + formatBytes(bytes);
    bar.appendChild(seg);
    left += bytes;
  }
  for (const [cls, bytes, name] of [["budget", b.budget, "budget"], ["floor", b.floor, "floor"]]) {
    if (bytes === null) continue;
    const mark = document.createElement("div");
    mark.className = "mark " + cls;
    mark.style.left = pct(bytes);
    mark.title = name + " " + formatBytes(bytes);
    bar.appendChild(mark);
  }
}

function renderBytes(report) {
  const b = report.bytes;
  renderBytesBar(b);
  const rows = [
    ["resident (fp16 + quantized + metadata)", formatBytes(b.resident)],
    ["  fp16", formatBytes(b.fp16)],
    ["  " + report.tiers.bits + "-bit", formatBytes(b.quant)],
    ["budget", b.budget === null ? "none" : formatBytes(b.budget)],
    ["floor (sinks, recent, growing window)", b.floor === null ? "–" : formatBytes(b.floor)],
    ["reserved (pools mapped, kept between turns)", formatBytes(b.reserved)],
    ["on disk (cold store)", formatBytes(b.cold)],
    ["fp16 cache of the same tokens", formatBytes(b.full_fp16)],
    ["server process RSS", formatBytes(b.process_rss)],
    ["promotions / demotions / evictions",
     report.moves.promotions + " / " + report.moves.demotions + " / " + report.moves.evictions],
  ];
  const body = $("bytes").querySelector("tbody");
  body.innerHTML = "";
  for (const [name, value] of rows) {
    const tr = document.createElement("tr");
    tr.innerHTML = "<td></td><td></td>";
    tr.children[0].textContent = name;
    tr.children[1].textContent = value;
    body.appendChild(tr);
  }
}

function tierShares(tiers) {
  let fp16 = 0, quant = 0, evicted = 0;
  for (const w of tiers.windows) { fp16 += w.fp16; quant += w.quant; evicted += w.evicted; }
  const total = fp16 + quant + evicted || 1;
  const pct = (x) => Math.round(100 * x / total) + "%";
  return [pct(fp16), pct(quant), pct(evicted)];
}

function updateLayerSelect(layers) {
  const select = $("layer-select");
  if (select.options.length === layers + 1) return;
  const keep = select.value;
  select.innerHTML = '<option value="all">all layers (share in each tier)</option>';
  for (let l = 0; l < layers; l++) {
    const option = document.createElement("option");
    option.value = String(l);
    option.textContent = "layer " + l;
    select.appendChild(option);
  }
  if (keep !== "all" && Number(keep) < layers) select.value = keep;
}

async function showCache(usage, cached) {
  const res = await api("/v1/sessions/" + encodeURIComponent(state.sessionId) + "/cache");
  if (!res.ok) throw new Error("the cache picture: " + await errorText(res));
  const report = await res.json();
  state.turnStarts.push(state.lastReport ? state.lastReport.tokens : 0);
  updateLayerSelect(report.tiers.layers);
  const promoted = renderStrip(report);
  renderBytes(report);
  const shares = tierShares(report.tiers);
  const tr = document.createElement("tr");
  const cells = [state.turn, report.tokens, cached, usage.prompt_tokens - cached, ...shares,
                 state.lastByLayer ? promoted.size : "–", formatBytes(report.bytes.resident)];
  for (const c of cells) {
    const td = document.createElement("td");
    td.textContent = String(c);
    tr.appendChild(td);
  }
  $("turns").querySelector("tbody").appendChild(tr);
  $("turn-info").textContent = "turn " + state.turn + ": " + report.tokens + " tokens, " +
      report.tiers.windows.length + " windows of " + report.tiers.window + " tokens, " +
      report.tiers.layers + " layers, policy " + report.policy;
  state.lastReport = report;
  state.previousByLayer = state.lastByLayer;
  state.lastByLayer = report.tiers.by_layer;
  state.lastPromoted = promoted;
  const strip = $("strip");
  strip.dataset.signature = report.tiers.by_layer.join("|");
  strip.dataset.promoted = String(promoted.size);
  strip.dataset.turn = String(state.turn);  // last: the picture of this turn is complete
}

// ---- wiring ----

$("ask-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question || state.busy) return;
  $("question").value = "";
  ask(question);
});
$("new-chat").addEventListener("click", resetConversation);
$("policy").addEventListener("change", showPolicyHelp);
$("key-button").addEventListener("click", () => askForKey());
$("layer-select").addEventListener("change", () => {
  if (!state.lastReport) return;
  // Redraw against the turn before the last one, so the promotions stay those of the last turn.
  const last = state.lastByLayer;
  state.lastByLayer = state.previousByLayer || null;
  renderStrip(state.lastReport);
  state.lastByLayer = last;
});
$("doc-file").addEventListener("change", async () => {
  const file = $("doc-file").files[0];
  if (!file) return;
  $("document").value = await file.text();
  $("doc-info").textContent = file.name + ", " + formatBytes(file.size);
});

resetConversation();
setBusy(false);
loadProps().catch((e) => showError("Could not reach the server: " + (e.message || e)));
