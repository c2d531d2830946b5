#!/usr/bin/env python3
"""kvpress's presses on the very instances of a qevict evaluation, for a side-by-side check.

qevict decides per 8-token window shared by a layer's KV heads, with equal per-layer budgets
(docs/kv-cache.md); kvpress's presses decide per token and per head. This script runs NVIDIA
kvpress (PyPI `kvpress`, a reference, never a dependency of the engine) on a task file that
`qevict eval --export-tasks` wrote, with the same completion-style prompts and the same
context-only protocol (the context is compressed, then every question comes as a later turn,
answers kept in the cache), and scores the answers as qevict's substring scorer does, so the
two tools' accuracies on the same prompts can be read side by side.

    scripts/kvpress_compare.py setup                      # .venv-kvpress (torch CPU use, kvpress)
    build/qevict eval -m MODEL --tasks niah --lengths 2048 --depths 0.1,0.5,0.9 --samples 2 \\
        --seed 1000 --export-tasks eval-out/kvp/tasks.jsonl
    .venv-kvpress/bin/python scripts/kvpress_compare.py run -m MODEL \\
        --tasks eval-out/kvp/tasks.jsonl --presses none,kvzip,kvzip-layerwise,kvzip-head-shared \\
        --ratios 0.9 --out eval-out/kvp/rows.jsonl

Presses (`--presses`, kvpress's names in brackets):
  none                 the full cache
  kvzip                KVzipPress: reconstruction scores, KV pairs ranked across every layer
                       and head (non-uniform budgets)
  kvzip-layerwise      KVzipPress(layerwise=True): the same ranking within each layer
  kvzip-head-shared    kvzip-layerwise with every token's score the max over the layer's KV
                       heads, so a layer keeps the same tokens in every head (qevict's sharing)
  kvzip-head-rank      kvzip-head-shared reducing the heads by their best rank instead of their
                       raw scores (qevict's reduction, engine/reconstruction.cc)
  kvzip-window         kvzip-head-shared with one score per aligned 8-token block (its max):
                       qevict's decision unit, without its tiers, sinks and recent windows
  snapkv, expected-attention, knorm   SnapKVPress, ExpectedAttentionPress, KnormPress

The model is the GGUF file itself, loaded by transformers (weights dequantized to fp32), so the
weights are those qevict runs, up to its quantized matmuls. Each row is one (instance, press,
ratio) with its turns' outputs and scores; a summary per (press, ratio) is printed at the end.
Only PyPI is needed; torch runs on the CPU.
"""
import argparse
import json
import tempfile
import os
import re
import subprocess
import sys
import time

VENV = ".venv-kvpress"
KVPRESS_SPEC = "kvpress==0.5.5"


def setup() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    venv = os.path.join(root, VENV)
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        subprocess.check_call([sys.executable, "-m", "venv", venv])
    # kvpress pins its torch and transformers; gguf lets transformers read the model file.
    subprocess.check_call([py, "-m", "pip", "install", "--quiet", KVPRESS_SPEC, "gguf"])
    print(f"kvpress_compare: {py} ready ({KVPRESS_SPEC})")


def normalize(text: str) -> str:
    """qevict's substring matching (eval/answer_match.h): ASCII case folded, whitespace runs
    collapsed to one space, trimmed."""
    return re.sub(r"\s+", " ", text.lower()).strip()


def appears(output: str, answer: str) -> bool:
    """qevict's substring scorer: the normalized answer inside the normalized output, with its
    numbers whole (no digit right before a leading digit or right after a trailing one)."""
    needle, hay = normalize(answer), normalize(output)
    if not needle:
        return False
    before = r"(?<![0-9])" if needle[0] in "0123456789" else ""
    after = r"(?![0-9])" if needle[-1] in "0123456789" else ""
    return re.search(before + re.escape(needle) + after, hay) is not None


def turn_score(output: str, answers, scoring: str) -> float:
    found = [1.0 if appears(output, a) else 0.0 for a in answers]
    if scoring == "all":
        return min(found)
    if scoring == "share":
        return sum(found) / len(found)
    return max(found)


def completion_turn(before: str, turn) -> str:
    """qevict's completion-style turn (eval/chat_turns.h)."""
    text = before + "Question: " + turn["question"] + "\nAnswer:"
    if turn.get("answer_prefix"):
        text += " " + turn["answer_prefix"]
    return text


def make_press(name: str, ratio: float):
    import kvpress
    import torch

    if name == "none":
        return None
    if name == "kvzip":
        return kvpress.KVzipPress(compression_ratio=ratio)
    if name == "kvzip-layerwise":
        return kvpress.KVzipPress(compression_ratio=ratio, layerwise=True)
    if name in ("kvzip-head-shared", "kvzip-window", "kvzip-head-rank"):
        window = 8 if name == "kvzip-window" else 1
        by_rank = name == "kvzip-head-rank"

        class SharedKVzip(kvpress.KVzipPress):
            """KVzip-layerwise deciding as qevict does: one score per token (the max over the
            layer's KV heads), and with window 8 one per aligned 8-token block (its max)."""

            def compress_post(self, model):
                s = self.score_val  # [layer, batch, kv head, token]
                if by_rank:  # each head's rank of the token, as a fraction (1 = its top)
                    s = s.argsort(dim=-1).argsort(dim=-1).to(s.dtype) / s.shape[-1]
                s = s.amax(dim=2, keepdim=True).expand_as(s)
                if window > 1:
                    n = s.shape[-1]
                    pad = (-n) % window
                    padded = torch.nn.functional.pad(s, (0, pad), value=float("-inf"))
                    blocks = padded.unflatten(-1, (-1, window)).amax(-1, keepdim=True)
                    s = blocks.expand(*blocks.shape[:-1], window).flatten(-2)[..., :n]
                self.score_val = s.contiguous()
                super().compress_post(model)

        return SharedKVzip(compression_ratio=ratio, layerwise=True)
    if name == "snapkv":
        return kvpress.SnapKVPress(compression_ratio=ratio)
    if name == "expected-attention":
        return kvpress.ExpectedAttentionPress(compression_ratio=ratio)
    if name == "knorm":
        return kvpress.KnormPress(compression_ratio=ratio)
    raise SystemExit(f"kvpress_compare: unknown press '{name}'")


def run(args) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

    torch.set_num_threads(args.threads)
    folder, name = os.path.split(os.path.abspath(args.model))
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    # KVzipPress loads the tokenizer from model.config.name_or_path and takes its reconstruction
    # prompt's frame from the chat template: give it this tokenizer without one, so that it
    # reconstructs raw text, as qevict's completion-style prompts are.
    tokenizer_dir = tempfile.mkdtemp(prefix="kvpress_compare_")
    tokenizer.chat_template = None
    tokenizer.save_pretrained(tokenizer_dir)
    model.config.name_or_path = tokenizer_dir
    tasks = [json.loads(line) for line in open(args.tasks, encoding="utf-8") if line.strip()]
    presses = args.presses.split(",")
    ratios = [float(r) for r in args.ratios.split(",")]
    eos = tokenizer.eos_token_id
    summary = {}
    out = open(args.out, "w", encoding="utf-8") if args.out else None
    for task in tasks:
        context_ids = tokenizer(task["context"], return_tensors="pt").input_ids
        for press_name in presses:
            for ratio in ratios if press_name != "none" else [0.0]:
                press = make_press(press_name, ratio)
                t0 = time.time()
                cache = DynamicCache()
                with torch.no_grad():
                    if press is None:
                        model.model(input_ids=context_ids, past_key_values=cache)
                    else:
                        with press(model):  # kvpress's pipeline prefills the same way
                            model.model(input_ids=context_ids, past_key_values=cache)
                    position = context_ids.shape[1]
                    kept = cache.get_seq_length()
                    turns = []
                    for i, turn in enumerate(task["turns"]):
                        text = completion_turn("\n\n" if i == 0 else "\n", turn)
                        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
                        generated = []
                        for _ in range(task.get("max_new_tokens", 32)):
                            n = ids.shape[1]
                            positions = torch.arange(position, position + n).unsqueeze(0)
                            logits = model(input_ids=ids, past_key_values=cache,
                                           position_ids=positions, logits_to_keep=1).logits
                            position += n
                            token = int(logits[0, -1].argmax())
                            if token == eos:
                                break
                            generated.append(token)
                            ids = torch.tensor([[token]])
                            so_far = tokenizer.decode(generated)
                            if "\n" in so_far and so_far.strip():  # completion answers end at a line break
                                break
                        if ids.shape[1] == 1 and generated:  # the last token is not in the cache yet
                            positions = torch.tensor([[position]])
                            model(input_ids=ids, past_key_values=cache, position_ids=positions,
                                  logits_to_keep=1)
                            position += 1
                        output = tokenizer.decode(generated)
                        turns.append({"output": output,
                                      "score": turn_score(output, turn["answers"],
                                                          turn.get("scoring", "any"))})
                accuracy = sum(t["score"] for t in turns) / len(turns)
                row = {"id": task["id"], "press": press_name, "ratio": ratio,
                       "context_tokens": int(context_ids.shape[1]), "kept_tokens": int(kept),
                       "accuracy": accuracy, "turns": turns, "seconds": time.time() - t0}
                if out:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                key = (press_name, ratio)
                summary.setdefault(key, []).append(accuracy)
                print(f"{task['id']} {press_name} {ratio}: {accuracy:.2f} "
                      f"{[t['output'] for t in turns]}", flush=True)
    print("\npress ratio n accuracy")
    for (press_name, ratio), scores in summary.items():
        print(f"{press_name} {ratio} {len(scores)} {sum(scores) / len(scores):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("setup", help=f"create {VENV} with {KVPRESS_SPEC}")
    r = sub.add_parser("run", help="run presses on a task file")
    r.add_argument("-m", "--model", required=True, help="GGUF model file")
    r.add_argument("--tasks", required=True, help="task file from qevict eval --export-tasks")
    r.add_argument("--presses", default="none,kvzip,kvzip-layerwise,kvzip-head-shared")
    r.add_argument("--ratios", default="0.9", help="kvpress compression ratios (share removed)")
    r.add_argument("--threads", type=int, default=os.cpu_count())
    r.add_argument("--out", help="rows, one JSON object per (instance, press, ratio)")
    args = parser.parse_args()
    if args.command == "setup":
        setup()
    else:
        run(args)


if __name__ == "__main__":
    main()
