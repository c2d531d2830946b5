#!/usr/bin/env python3
"""Golden logits from Hugging Face transformers loading the same GGUF (weights dequantized to
fp32, computation in fp32, no activation quantization), for tests/golden/logits_<model>_hf.json.

Run once by hand (the output is committed); needs `pip install torch transformers gguf accelerate`:
    python3 scripts/gen_golden_logits_hf.py models/SmolLM2-135M-Instruct.Q4_1.gguf
    python3 scripts/gen_golden_logits_hf.py models/gemma-3-270m-q4_k_m.gguf \
        tests/golden/logits_gemma3_270m.json tests/golden/logits_gemma3_270m_hf.json

The prompts and their token ids are those of tests/golden/logits_smollm2.json (llama.cpp's
goldens), so both references see identical inputs. qevict's exact-matmul path is compared with
these within float rounding; its fast quantized path is compared with llama.cpp's.
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM

TOP_K = 10
N_GREEDY = 64


def main() -> None:
    model_path = sys.argv[1]
    src = sys.argv[2] if len(sys.argv) > 2 else "tests/golden/logits_smollm2.json"
    out_path = sys.argv[3] if len(sys.argv) > 3 else "tests/golden/logits_smollm2_hf.json"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(os.path.abspath(model_path)), gguf_file=os.path.basename(model_path),
        dtype=torch.float32)
    model.eval()
    source = json.load(open(src, encoding="utf-8"))
    # The EOS the greedy continuation stops at: the one llama.cpp's golden recorded, else 2
    # (SmolLM2's <|im_end|>).
    eos = source.get("gguf", {}).get("eos", {}).get("id", 2)
    cases = []
    for c in source["cases"]:
        tokens = c["tokens"]
        with torch.no_grad():
            logits = model(torch.tensor([tokens])).logits[0].double()
        tops = []
        for entry in c["top_logits"]:
            p = entry["position"]
            values, ids = torch.sort(logits[p], descending=True, stable=True)
            tops.append({"position": p, "ids": [int(i) for i in ids[:TOP_K]],
                         "logits": [round(float(v), 5) for v in values[:TOP_K]]})
        seq = list(tokens)
        greedy, margins = [], []
        last = logits[-1]
        for _ in range(N_GREEDY):
            values, ids = torch.sort(last, descending=True, stable=True)
            tok = int(ids[0])
            margins.append(round(float(values[0] - values[1]), 5))
            greedy.append(tok)
            if tok == eos:
                break
            seq.append(tok)
            with torch.no_grad():
                last = model(torch.tensor([seq])).logits[0, -1].double()
        cases.append({"name": c["name"], "tokens": tokens, "top_logits": tops, "greedy": greedy,
                      "greedy_margins": margins})
        print(f"{c['name']}: {len(tokens)} tokens, greedy {greedy[:8]}...")
    import transformers
    out = {"reference": f"transformers {transformers.__version__} (fp32, GGUF dequantized), "
                        f"torch {torch.__version__}",
           "model": os.path.basename(model_path), "top_k": TOP_K, "cases": cases}
    if "tokens_include_bos" in source:
        out["tokens_include_bos"] = source["tokens_include_bos"]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
