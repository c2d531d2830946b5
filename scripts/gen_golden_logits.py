#!/usr/bin/env python3
"""Golden logits and greedy continuations from an independent implementation (llama.cpp via the
PyPI package llama-cpp-python), for tests/golden/logits_smollm2.json.

Run once by hand (the output is committed); needs `pip install llama-cpp-python numpy`:
    python3 scripts/gen_golden_logits.py models/SmolLM2-135M-Instruct.Q4_1.gguf

For each prompt the token ids come from llama.cpp's own tokenizer and are stored, so the test
feeds the same ids to qevict. n_batch=1: batched evaluation in this build
(AMX/AVX-512 path) crashed on the machine the goldens were made on. Recorded: the top-k logits at several positions (teacher-forced
over the prompt) and a greedy continuation of 64 tokens taken by argmax over raw logits.
"""
import json
import sys

import llama_cpp
import numpy as np

CHATML = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
          "Face<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n")

LONG_STORY = " ".join(
    f"Entry {i}: the lighthouse keeper on island {i % 7} wrote that the wind came from the "
    f"{['north', 'east', 'south', 'west'][i % 4]} and that {i * 3 % 11} ships passed before noon."
    for i in range(60))

PROMPTS = [
    ("chat_capital", CHATML.format(q="What is the capital of France?")),
    ("chat_planets", CHATML.format(q="Name the planets of the solar system in order.")),
    ("raw_story", "Once upon a time, in a small village by the sea, there lived"),
    ("raw_code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("long_log", LONG_STORY + "\n\nQuestion: how many ships passed island 3 on entry 10? Answer:"),
]
TOP_K = 10
N_GREEDY = 64


def main() -> None:
    model_path = sys.argv[1]
    out_path = sys.argv[2] if len(sys.argv) > 2 else "tests/golden/logits_smollm2.json"
    llm = llama_cpp.Llama(model_path=model_path, n_ctx=4096, n_batch=1, logits_all=True,
                          n_threads=2, verbose=False, seed=0)
    cases = []
    for name, text in PROMPTS:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        llm.eval(tokens)
        n = len(tokens)
        logits = np.array(llm.scores[:n], dtype=np.float64)
        positions = sorted({0, n // 4, n // 2, (3 * n) // 4, n - 1})
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
        cases.append({"name": name, "text": text, "tokens": [int(t) for t in tokens],
                      "top_logits": tops, "greedy": greedy, "greedy_margins": margins,
                      "greedy_text": llm.detokenize(greedy).decode("utf-8", errors="replace")})
        print(f"{name}: {n} prompt tokens -> {cases[-1]['greedy_text'][:60]!r}")
    out = {"reference": f"llama.cpp via llama-cpp-python {llama_cpp.__version__}",
           "model": "SmolLM2-135M-Instruct.Q4_1.gguf", "top_k": TOP_K, "cases": cases}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
