#!/usr/bin/env python3
"""Golden logits and greedy continuations from an independent implementation (llama.cpp via the
PyPI package llama-cpp-python), for tests/golden/logits_<model>.json.

Run once by hand (the output is committed); needs llama-cpp-python and numpy:
    python3 scripts/gen_golden_logits.py models/SmolLM2-135M-Instruct.Q4_1.gguf
    python3 scripts/gen_golden_logits.py models/gemma-3-270m-q4_k_m.gguf
    python3 scripts/gen_golden_logits.py MODEL [OUT] [--set smollm2|gemma3] [--n-batch N]

The prompt set (and default output) is chosen from the model's file name, or by --set:
  smollm2  tests/golden/logits_smollm2.json: SmolLM2-135M-Instruct, ChatML and raw prompts,
           token ids WITHOUT BOS (the ChatML text carries its own control tokens).
  gemma3   tests/golden/logits_gemma3_270m.json: Gemma 3 270M base, three raw completion
           prompts, token ids WITH the BOS llama.cpp adds (add_bos = true in the GGUF), one
           prompt longer than Gemma's 512-token sliding window, with top-k logits recorded
           on both sides of position 512 as well.

For each prompt the token ids come from llama.cpp's own tokenizer and are stored, so the test
feeds the same ids to qevict. n_batch=1 by default: batched evaluation in the native build
(AMX/AVX-512 path) crashed on the machine the SmolLM2 goldens were made on. Recorded: the top-k
logits at several positions (teacher-forced over the prompt) and a greedy continuation of 64
tokens taken by argmax over raw logits (stopping at the model's EOS).
"""
import argparse
import json
import os

import llama_cpp
import numpy as np

CHATML = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
          "Face<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n")

LONG_STORY = " ".join(
    f"Entry {i}: the lighthouse keeper on island {i % 7} wrote that the wind came from the "
    f"{['north', 'east', 'south', 'west'][i % 4]} and that {i * 3 % 11} ships passed before noon."
    for i in range(60))

# Gemma 3 long prompt: a list of 34 facts about fictional people, ~1220 tokens with Gemma's
# tokenizer, ending in a question about Kwame (named once, in fact 11, at token 363), more
# than 512 tokens before the end: only the global (non-sliding-window) layers see it from there.
_NAMES = ["Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiroshi", "Ines",
          "Jonas", "Kwame", "Lucia", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa",
          "Samir", "Tomas", "Ulla", "Viktor", "Wen", "Ximena", "Yusuf", "Zofia"]
_CITIES = ["Lisbon", "Oslo", "Nairobi", "Kyoto", "Lima", "Tallinn", "Quebec", "Hanoi", "Porto",
           "Bergen", "Accra", "Cusco"]
_FRUITS = ["apples", "pears", "plums", "figs", "cherries", "mangoes", "apricots", "lemons"]
_JOBS = ["a baker", "a carpenter", "a pilot", "a nurse", "a librarian", "a fisherman",
         "a teacher", "a gardener", "a clockmaker"]
GEMMA_FACTS = "\n".join(
    f"Fact {i + 1}: {_NAMES[i % 26]} lives in {_CITIES[(i * 5) % 12]}, works as "
    f"{_JOBS[(i * 7) % 9]}, keeps {(i * 13) % 17 + 2} {_FRUITS[(i * 3) % 8]} in a blue "
    f"basket and was born in {1950 + (i * 11) % 60}."
    for i in range(34))
GEMMA_LONG = ("The following is a list of facts about the people of a small archipelago.\n\n"
              + GEMMA_FACTS + "\n\nQuestion: In which city does Kwame live, and what is his "
              "job?\nAnswer: Kwame lives in")

PROMPT_SETS = {
    "smollm2": {
        "out": "tests/golden/logits_smollm2.json",
        "add_bos": False,
        "extra_positions": [],
        "prompts": [
            ("chat_capital", CHATML.format(q="What is the capital of France?")),
            ("chat_planets", CHATML.format(q="Name the planets of the solar system in order.")),
            ("raw_story", "Once upon a time, in a small village by the sea, there lived"),
            ("raw_code",
             "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
            ("long_log",
             LONG_STORY + "\n\nQuestion: how many ships passed island 3 on entry 10? Answer:"),
        ],
    },
    "gemma3": {
        "out": "tests/golden/logits_gemma3_270m.json",
        "add_bos": True,
        # Around the sliding window (512): the last position whose window still reaches
        # position 0, the first ones that do not, and a few further out.
        "extra_positions": [1, 255, 510, 511, 512, 513, 700, 1023, 1024],
        "prompts": [
            ("raw_story", "Once upon a time, in a small village by the sea, there lived an old "
                          "fisherman named"),
            ("raw_code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
                         "    if n < 2:\n"),
            ("long_facts", GEMMA_LONG),
        ],
    },
}
TOP_K = 10
N_GREEDY = 64


def model_set(path):
    return "gemma3" if "gemma-3" in os.path.basename(path).lower() else "smollm2"


def gguf_facts(llm):
    """What llama.cpp's GGUF metadata and vocab say about special tokens and the template."""
    meta = llm.metadata
    template = meta.get("tokenizer.chat_template")
    model = llm.model
    vocab = llama_cpp.llama_model_get_vocab(model)

    def tok(t):
        return None if t < 0 else {"id": int(t), "text": llm.detokenize([t], special=True)
                                   .decode("utf-8", errors="replace")}
    return {
        "tokenizer.chat_template": None if template is None else template[:400],
        "chat_template_present": template is not None,
        "add_bos (llama_vocab_get_add_bos)": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos (llama_vocab_get_add_eos)": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "bos": tok(llama_cpp.llama_vocab_bos(vocab)),
        "eos": tok(llama_cpp.llama_vocab_eos(vocab)),
        "eot": tok(llama_cpp.llama_vocab_eot(vocab)),
        "gguf_keys": {k: v for k, v in sorted(meta.items())
                      if k.startswith(("tokenizer.ggml.", "general.architecture"))
                      or ".attention." in k or ".rope." in k},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--set", choices=sorted(PROMPT_SETS), help="prompt set (default: from "
                        "the model file name)")
    parser.add_argument("--n-batch", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=4096)
    args = parser.parse_args()
    name = args.set or model_set(args.model)
    cfg = PROMPT_SETS[name]
    out_path = args.out or cfg["out"]
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=args.n_ctx, n_batch=args.n_batch,
                          n_ubatch=args.n_batch, logits_all=True, n_threads=2, verbose=False,
                          seed=0)
    cases = []
    for case_name, text in cfg["prompts"]:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=cfg["add_bos"], special=True)
        llm.reset()
        llm.eval(tokens)
        n = len(tokens)
        logits = np.array(llm.scores[:n], dtype=np.float64)
        positions = sorted({0, n // 4, n // 2, (3 * n) // 4, n - 1} |
                           {p for p in cfg["extra_positions"] if p < n})
        tops = []
        for p in positions:
            order = np.argsort(-logits[p], kind="stable")[:TOP_K]
            tops.append({"position": p, "ids": [int(i) for i in order],
                         "logits": [round(float(logits[p][i]), 5) for i in order]})
        greedy = []
        last = logits[n - 1]
        margins = []
        for _ in range(N_GREEDY):
            order = np.argsort(-last, kind="stable")[:2]
            tok = int(order[0])
            margins.append(round(float(last[order[0]] - last[order[1]]), 5))
            greedy.append(tok)
            if tok == llm.token_eos():
                break
            llm.eval([tok])
            last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        cases.append({"name": case_name, "text": text, "tokens": [int(t) for t in tokens],
                      "top_logits": tops, "greedy": greedy, "greedy_margins": margins,
                      "greedy_text": llm.detokenize(greedy).decode("utf-8", errors="replace")})
        print(f"{case_name}: {n} prompt tokens -> {cases[-1]['greedy_text'][:60]!r}")
    out = {"reference": f"llama.cpp via llama-cpp-python {llama_cpp.__version__}",
           "model": os.path.basename(args.model), "top_k": TOP_K, "cases": cases}
    if name != "smollm2":  # the SmolLM2 file keeps its original layout
        out["tokens_include_bos"] = cfg["add_bos"]
        out["settings"] = {"n_ctx": args.n_ctx, "n_batch": args.n_batch, "n_threads": 2,
                           "kv_cache": "llama.cpp default (f16)", "flash_attn": False,
                           "cmake_args": os.environ.get("QEVICT_LLAMA_CMAKE_ARGS", "")}
        out["gguf"] = gguf_facts(llm)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
