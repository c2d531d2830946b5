#!/usr/bin/env python3
"""Generates the per-architecture golden files in tests/golden/arch/.

For each family (llama, mistral, qwen2, qwen3, gemma3, phi3) it
  1. builds a tiny randomly initialised Hugging Face checkpoint with `transformers` (seeded, with
     weights drawn wider than HF's default init so that every component moves the logits),
  2. saves it to a temporary directory together with a tiny SentencePiece tokenizer.model
     trained here on generated text (vocab = the model's vocab),
  3. converts it with llama.cpp's own convert_hf_to_gguf.py --outtype f32, run from the vendored
     llama.cpp of the llama-cpp-python sdist in third_party_build/ (never copied into the repo),
  4. runs the HF model in float32 with eager attention on a fixed token sequence and writes the
     logits of every position to <name>.json next to <name>.gguf,
  5. (unless --no-llamacpp) runs llama.cpp itself (a 40-line program linked against the static
     libllama built by scripts/bench_llamacpp.sh) on the same GGUF and tokens and records the
     max |llama.cpp - HF| logit difference,
  6. rewrites the generated part of tests/golden/arch/README.md (GGUF keys and tensors).

Run it with the reference venv:
    scripts/setup_reference_env.sh
    .venv-ref/bin/python scripts/gen_arch_golden.py            # all families
    .venv-ref/bin/python scripts/gen_arch_golden.py gemma3 qwen2
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
LLAMA_CPP_PYTHON_VERSION = os.environ.get("LLAMA_CPP_PYTHON_VERSION", "0.3.36")
LLROOT = REPO / "third_party_build" / "llamacpp"
LLAMA_SRC = LLROOT / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}" / "vendor" / "llama.cpp"
LLAMA_BUILD = LLROOT / f"build-{LLAMA_CPP_PYTHON_VERSION}"
TOOL_DIR = LLROOT / "arch-golden"
OUT_DIR = REPO / "tests" / "golden" / "arch"

SEED = 20240611
N_TOKENS = 64
VOCAB = 320

# --------------------------------------------------------------------------------------------
# Families. "config" is passed to the HF config class; everything not named keeps its default.
# --------------------------------------------------------------------------------------------
FAMILIES: dict[str, dict] = {
    "llama": dict(
        hf_class="LlamaForCausalLM", config_class="LlamaConfig", gguf_arch="llama",
        config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                    rope_theta=10000.0, rms_norm_eps=1e-5, max_position_embeddings=256,
                    tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                    hidden_act="silu"),
    ),
    "mistral": dict(
        hf_class="MistralForCausalLM", config_class="MistralConfig", gguf_arch="llama",
        config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                    rope_theta=1000000.0, rms_norm_eps=1e-5, max_position_embeddings=256,
                    tie_word_embeddings=False, sliding_window=8, hidden_act="silu"),
    ),
    "qwen2": dict(
        hf_class="Qwen2ForCausalLM", config_class="Qwen2Config", gguf_arch="qwen2",
        config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2,
                    rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=256,
                    tie_word_embeddings=True, use_sliding_window=False, hidden_act="silu"),
    ),
    "qwen3": dict(
        hf_class="Qwen3ForCausalLM", config_class="Qwen3Config", gguf_arch="qwen3",
        config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                    rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=256,
                    tie_word_embeddings=True, attention_bias=False, use_sliding_window=False,
                    hidden_act="silu"),
    ),
    "gemma3": dict(
        hf_class="Gemma3ForCausalLM", config_class="Gemma3TextConfig", gguf_arch="gemma3",
        # 7 layers so that llama.cpp's fixed pattern (every 6th layer global; the converter
        # writes no pattern) has a global layer that is not the last: layers 0-4 and 6 are
        # sliding, layer 5 is global. query_pre_attn_scalar == head_dim because the converter
        # does not write it and llama.cpp uses 1/sqrt(head_dim) (except for the 62-layer 27B).
        config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=7,
                    num_attention_heads=4, num_key_value_heads=1, head_dim=24,
                    query_pre_attn_scalar=24, sliding_window=8, sliding_window_pattern=6,
                    rope_theta=1000000.0, rope_local_base_freq=20000.0, rms_norm_eps=1e-6,
                    max_position_embeddings=256, tie_word_embeddings=True,
                    final_logit_softcapping=15.0, attn_logit_softcapping=None,
                    hidden_activation="gelu_pytorch_tanh", rope_scaling=None),
    ),
    "phi3": dict(
        hf_class="Phi3ForCausalLM", config_class="Phi3Config", gguf_arch="phi3",
        # sliding_window None: llama.cpp disables SWA for phi3 even when the key is > 0.
        config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2,
                    rope_theta=10000.0, rms_norm_eps=1e-5, max_position_embeddings=256,
                    original_max_position_embeddings=256, rope_scaling=None,
                    sliding_window=None, tie_word_embeddings=False, hidden_act="silu",
                    partial_rotary_factor=1.0),
    ),
}

# Config mistakes whose effect on the logits is recorded in the JSON ("sensitivity_max_abs_diff").
SENSITIVITY: dict[str, dict[str, dict]] = {
    "mistral": {"no_sliding_window": dict(sliding_window=None)},
    "gemma3": {
        "no_sliding_window": dict(sliding_window=256),
        "all_layers_sliding": dict(layer_types=["sliding_attention"] * 7),
        "rope_local_base_freq_10000": dict(rope_local_base_freq=10000.0),
        "rope_theta_10000_everywhere": dict(rope_theta=10000.0, rope_local_base_freq=10000.0),
        "query_scale_hidden_over_heads": dict(query_pre_attn_scalar=16),
        "no_final_logit_softcapping": dict(final_logit_softcapping=None),
    },
    "qwen3": {"rope_theta_10000": dict(rope_theta=10000.0)},
    "qwen2": {"rope_theta_10000": dict(rope_theta=10000.0)},
    "llama": {"rope_theta_1e6": dict(rope_theta=1000000.0)},
    "phi3": {"rope_theta_1e6": dict(rope_theta=1000000.0)},
}

LLAMA_LOGITS_CPP = r'''
// Generated by scripts/gen_arch_golden.py: llama.cpp's logits for every position of a token-id
// sequence, float32 row-major [n_tokens][n_vocab]. Usage: llama_logits MODEL.gguf OUT.bin ID...
#include "llama.h"
#include <cstdio>
#include <cstdlib>
#include <vector>
int main(int argc, char ** argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s model.gguf out.bin id...\n", argv[0]); return 2; }
    std::vector<llama_token> toks;
    for (int i = 3; i < argc; ++i) toks.push_back((llama_token) atoi(argv[i]));
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "load failed\n"); return 1; }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256; cp.n_batch = 256; cp.n_ubatch = 256; cp.n_threads = 2; cp.n_threads_batch = 2;
    cp.swa_full = true;                       // keep every position (exact SWA masking)
    cp.type_k = GGML_TYPE_F32;                // f32 KV cache: compare f32 against f32
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "context failed\n"); return 1; }
    const int n = (int) toks.size();
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
        b.token[i] = toks[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
    const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    FILE * f = fopen(argv[2], "wb");
    for (int i = 0; i < n; ++i) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), nv, f);
    fclose(f);
    printf("n_swa=%d n_vocab=%d\n", llama_model_n_swa(model), nv);
    llama_batch_free(b); llama_free(ctx); llama_model_free(model); llama_backend_free();
    return 0;
}
'''


def log(*a):
    print("gen_arch_golden:", *a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------
def train_tokenizer(workdir: Path, vocab: int) -> Path:
    """A tiny SentencePiece (unigram) model trained on seeded pseudo-English text."""
    import sentencepiece as spm
    rng = random.Random(SEED)
    syll = ["ka", "to", "ri", "ne", "mu", "sa", "lo", "pe", "di", "an", "el", "or", "us", "th",
            "qu", "ve", "zi", "bo", "fa", "gu", "he", "ji", "wo", "xy", "ce", "ly", "ing", "st"]
    words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(400)]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) +
             rng.choice([".", ",", "!", "?", ";"]) for _ in range(3000)]
    text = workdir / "corpus.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    prefix = workdir / "tok"
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(prefix), vocab_size=vocab, model_type="unigram",
        character_coverage=1.0, byte_fallback=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=1, minloglevel=2, seed_sentencepiece_size=100000)
    sp = spm.SentencePieceProcessor(model_file=str(prefix) + ".model")
    assert sp.get_piece_size() == vocab, sp.get_piece_size()
    return Path(str(prefix) + ".model")


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------
def randomize(model: torch.nn.Module, family: str, gen: torch.Generator) -> dict:
    """Re-draws every parameter; returns the init description recorded in the JSON."""
    gemma = family == "gemma3"
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name or name.endswith("_norm.weight"):
                # RMSNorm weights: x*w (around 1 +- 0.3), Gemma: x*(1+w) with w around +-0.3
                u = torch.rand(p.shape, generator=gen) * 0.6 - 0.3
                p.copy_(u if gemma else 1.0 + u)
            elif name.endswith(".bias"):
                s = torch.where(torch.rand(p.shape, generator=gen) < 0.5, -1.0, 1.0)
                p.copy_(s * (0.1 + 0.4 * torch.rand(p.shape, generator=gen)))
            elif p.dim() == 2:
                if "embed_tokens" in name:
                    std = 0.5 if not gemma else 0.25  # Gemma multiplies by sqrt(hidden) = 8
                else:
                    std = 1.6 / math.sqrt(p.shape[1])  # fan-in scaled; 0.2 for fan-in 64
                p.copy_(torch.randn(p.shape, generator=gen) * std)
            else:
                raise RuntimeError(f"unhandled parameter {name} {tuple(p.shape)}")
    return {
        "matrices": "normal, std 1.6/sqrt(fan_in) (0.2 for fan-in 64, 0.141 for 128)",
        "embed_tokens": ("normal, std 0.25 (Gemma multiplies the embedding by sqrt(hidden))" if gemma
                         else "normal, std 0.5"),
        "norm_weights": ("uniform(-0.3, 0.3) (HF Gemma3RMSNorm computes x*(1+w))" if gemma
                         else "1 + uniform(-0.3, 0.3)"),
        "biases": "sign * uniform(0.1, 0.5)",
        "torch_seed": SEED,
    }


def build_model(family: str, spec: dict, eager: bool = True, overrides: dict | None = None):
    import transformers
    cfg_cls = getattr(transformers, spec["config_class"])
    model_cls = getattr(transformers, spec["hf_class"])
    kw = dict(spec["config"], vocab_size=VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=None)
    if overrides:
        kw.update(overrides)
    cfg = cfg_cls(**kw)
    cfg._attn_implementation = "eager"
    cfg.architectures = [spec["hf_class"]]
    model = model_cls(cfg)
    model.eval()
    return model, cfg


def hf_logits(model, tokens: list[int]) -> np.ndarray:
    with torch.no_grad():
        out = model(torch.tensor([tokens], dtype=torch.long), use_cache=False)
    return out.logits[0].float().numpy()


# --------------------------------------------------------------------------------------------
# llama.cpp
# --------------------------------------------------------------------------------------------
def llama_tool() -> Path | None:
    exe = TOOL_DIR / "llama_logits"
    libs = [LLAMA_BUILD / "src" / "libllama.a", LLAMA_BUILD / "ggml" / "src" / "libggml.a",
            LLAMA_BUILD / "ggml" / "src" / "libggml-cpu.a", LLAMA_BUILD / "ggml" / "src" / "libggml-base.a"]
    if not all(p.is_file() for p in libs):
        log("llama.cpp static libraries missing; building them with scripts/bench_llamacpp.sh build")
        r = subprocess.run([str(REPO / "scripts" / "bench_llamacpp.sh"), "build"], cwd=REPO)
        if r.returncode != 0 or not all(p.is_file() for p in libs):
            log("llama.cpp build failed; skipping the llama.cpp cross-check")
            return None
    TOOL_DIR.mkdir(parents=True, exist_ok=True)
    src = TOOL_DIR / "llama_logits.cpp"
    if not src.is_file() or src.read_text() != LLAMA_LOGITS_CPP:
        src.write_text(LLAMA_LOGITS_CPP)
    if exe.is_file() and exe.stat().st_mtime >= max(p.stat().st_mtime for p in libs + [src]):
        return exe
    cmd = ["c++", "-std=c++17", "-O1", f"-I{LLAMA_SRC / 'include'}", f"-I{LLAMA_SRC / 'ggml' / 'include'}",
           str(src), "-o", str(exe)] + [str(p) for p in libs] + ["-fopenmp", "-lpthread", "-ldl", "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        log("compiling llama_logits failed:\n" + r.stderr[-3000:])
        return None
    return exe


def llamacpp_logits(exe: Path, gguf_path: Path, tokens: list[int], n_vocab: int) -> tuple[np.ndarray, str]:
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "logits.bin"
        r = subprocess.run([str(exe), str(gguf_path), str(out)] + [str(t) for t in tokens],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"llama_logits failed: {r.stderr[-3000:]}")
        a = np.fromfile(out, dtype=np.float32).reshape(len(tokens), n_vocab)
        return a, r.stdout.strip()


# --------------------------------------------------------------------------------------------
# GGUF description
# --------------------------------------------------------------------------------------------
def describe_gguf(path: Path) -> tuple[list[tuple[str, str]], list[tuple[str, list[int], str]]]:
    sys.path.insert(1, str(LLAMA_SRC / "gguf-py"))
    import gguf
    r = gguf.GGUFReader(str(path))
    kv = []
    for f in r.fields.values():
        if f.name.startswith("GGUF."):
            continue
        t = f.types[0] if f.types else None
        if t == gguf.GGUFValueType.ARRAY:
            n = len(f.data)
            et = f.types[-1].name.lower()
            if f.name.startswith("tokenizer.ggml."):
                val = f"[{et} x {n}]"
            else:
                val = "[" + ", ".join(str(f.parts[i].tolist()[0]) if f.types[-1] != gguf.GGUFValueType.STRING
                                      else bytes(f.parts[i]).decode("utf-8", "replace") for i in f.data) + "]"
                val += f" ({et} x {n})"
        elif t == gguf.GGUFValueType.STRING:
            val = repr(bytes(f.parts[f.data[0]]).decode("utf-8", "replace"))
        else:
            v = f.parts[f.data[0]].tolist()[0]
            val = f"{v} ({t.name.lower()})"
        kv.append((f.name, val))
    tensors = [(t.name, [int(x) for x in t.shape], t.tensor_type.name) for t in r.tensors]
    return kv, tensors


def with_key(src: Path, dst: Path, key: str, value, value_type=None, drop_tensor: str = "") -> None:
    """Copies a GGUF setting one metadata key (uint32 unless value_type says otherwise) and
    optionally leaving out one tensor (gguf-py's own reader and writer)."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata
    value_type = value_type or gguf.GGUFValueType.UINT32
    reader = gguf.GGUFReader(str(src), "r")
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(str(dst), arch=arch, endianess=reader.endianess)
    if drop_tensor:
        reader.tensors = [t for t in reader.tensors if t.name != drop_tensor]
    details = MetadataDetails(value_type, value,
                              sub_type=gguf.GGUFValueType.BOOL if isinstance(value, list) else None)
    copy_with_new_metadata(reader, writer, {key: details} if key else {}, [])


# Valid GGUF files that describe a broken model of the new families (docs/security.md, class 7):
# the loader must refuse each with a message naming the problem. Written next to the goldens'
# GGUFs into tests/fixtures/gguf/arch/ with expected.txt (tests/cli_errors_test.sh reads it).
def malformed_fixtures() -> None:
    import gguf
    out = Path("tests/fixtures/gguf/arch")
    out.mkdir(parents=True, exist_ok=True)
    F = gguf.GGUFValueType
    cases = [
        ("gemma3_pattern_wrong_length.gguf", "gemma3", "gemma3.attention.sliding_window_pattern",
         [True, False, True], F.ARRAY, "", "sliding_window_pattern",
         "the layer pattern has 3 entries for 7 layers"),
        ("gemma3_scale_negative.gguf", "gemma3", "gemma3.attention.scale", -0.5, F.FLOAT32, "",
         "gemma3.attention.scale", "query scale -0.5"),
        ("gemma3_no_post_norm.gguf", "gemma3", "", None, None, "blk.2.post_attention_norm.weight",
         "post_attention_norm", "layer 2 lacks its post-attention norm"),
        ("qwen3_one_qk_norm.gguf", "qwen3", "", None, None, "blk.1.attn_k_norm.weight",
         "attn_q_norm/attn_k_norm", "layer 1 has a Q norm but no K norm"),
        ("phi3_qkv_wrong_rows.gguf", "phi3", "phi3.attention.head_count_kv", 4, F.UINT32, "",
         "attn_qkv.weight", "head_count_kv 4 does not match the fused attn_qkv rows"),
        ("gemma3_softcap_negative.gguf", "gemma3", "gemma3.final_logit_softcapping", -15.0,
         F.FLOAT32, "", "final_logit_softcapping", "soft-capping by -15"),
    ]
    lines = ["# Valid GGUF files describing a broken model of the families beyond llama, written by",
             "# scripts/gen_arch_golden.py (malformed_fixtures) from tests/golden/arch/*.gguf.",
             "# Each line: <file> <substring the loader's error message should contain>"]
    for name, family, key, value, vtype, drop, expect, what in cases:
        with_key(OUT_DIR / f"{family}.gguf", out / name, key, value, vtype, drop)
        lines += [f"# {name}: {what}", f"{name} {expect}"]
    (out / "expected.txt").write_text("\n".join(lines) + "\n")


def sig6(x: float) -> float:
    return float(f"{x:.6g}")


# --------------------------------------------------------------------------------------------
def generate(family: str, spec: dict, tok_model: Path, tokens: list[int], llama_exe: Path | None,
             keep: Path | None) -> dict:
    import transformers
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + sum(map(ord, family)))
    model, cfg = build_model(family, spec)
    init = randomize(model, family, gen)

    with tempfile.TemporaryDirectory(prefix=f"arch-{family}-") as td:
        hf_dir = Path(td) / f"tiny-{family}"
        model.save_pretrained(hf_dir, safe_serialization=True)
        shutil.copy(tok_model, hf_dir / "tokenizer.model")
        if family == "phi3":
            # llama.cpp's vocab loader looks "<|endoftext|>" up for any model whose general.name
            # contains "phi3" (it exists in every real Phi-3 vocab), so give the tiny model the
            # Phi-3 added tokens the way the real tokenizer_config.json declares them: they
            # replace the last two SentencePiece pieces (the converter marks them CONTROL).
            (hf_dir / "tokenizer_config.json").write_text(json.dumps({
                "tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "<|endoftext|>",
                "unk_token": "<unk>", "added_tokens_decoder": {
                    str(VOCAB - 2): {"content": "<|endoftext|>", "special": True},
                    str(VOCAB - 1): {"content": "<|end|>", "special": True}}}, indent=1))
        if keep:
            shutil.copytree(hf_dir, keep / f"tiny-{family}", dirs_exist_ok=True)

        # Reload from disk so that the golden logits come from exactly what the converter read.
        model = getattr(transformers, spec["hf_class"]).from_pretrained(
            hf_dir, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        logits = hf_logits(model, tokens)

        extra = {}
        if family == "mistral":
            # What the GGUF can express: the converter writes no sliding window for Mistral, so
            # llama.cpp runs it with full causal attention. Same weights, sliding_window=None.
            m2 = getattr(transformers, spec["hf_class"]).from_pretrained(
                hf_dir, dtype=torch.float32, attn_implementation="eager", sliding_window=None)
            m2.eval()
            extra["logits_full_attention"] = hf_logits(m2, tokens)

        # How far the golden moves when one config detail is got wrong (shows what it catches).
        sens = {}
        for label, ov in SENSITIVITY.get(family, {}).items():
            m3 = getattr(transformers, spec["hf_class"]).from_pretrained(
                hf_dir, dtype=torch.float32, attn_implementation="eager", **ov)
            m3.eval()
            sens[label] = float(np.abs(hf_logits(m3, tokens) - logits).max())
            log(f"{family}: sensitivity {label}: max |diff| {sens[label]:.3g}")

        gguf_path = OUT_DIR / f"{family}.gguf"
        conv = [sys.executable, str(LLAMA_SRC / "convert_hf_to_gguf.py"), str(hf_dir),
                "--outtype", "f32", "--outfile", str(gguf_path)]
        r = subprocess.run(conv, capture_output=True, text=True, cwd=str(LLAMA_SRC))
        if r.returncode != 0:
            raise RuntimeError(f"convert_hf_to_gguf failed for {family}:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
        conv_log = [l for l in (r.stderr + r.stdout).splitlines()
                    if "hf-to-gguf:gguf:" in l or "WARNING" in l]
        if family == "mistral":
            # The converter drops Mistral's window; mistral_swa.gguf is the same file with the
            # key a GGUF that keeps it carries (llama.attention.sliding_window), so the engine's
            # sliding-window path for llama-architecture files is checked against `logits`.
            with_key(gguf_path, OUT_DIR / "mistral_swa.gguf", "llama.attention.sliding_window",
                     spec["config"]["sliding_window"])
        saved_cfg = json.loads((hf_dir / "config.json").read_text())

    # sanity: logits must be spread out and varied
    top1 = logits.argmax(-1)
    stats = {"logit_std": float(logits.std()), "logit_min": float(logits.min()),
             "logit_max": float(logits.max()), "distinct_top1": int(len(set(top1.tolist())))}
    log(f"{family}: logit std {stats['logit_std']:.3f}, range [{stats['logit_min']:.2f}, "
        f"{stats['logit_max']:.2f}], {stats['distinct_top1']} distinct top-1 over {len(tokens)} positions")
    if stats["logit_std"] < 1.0 or stats["distinct_top1"] < 8:
        log(f"WARNING {family}: logits not spread out enough")

    rel_cfg_keys = sorted(set(spec["config"]) | {"vocab_size", "layer_types", "model_type",
                                                 "bos_token_id", "eos_token_id", "architectures"})
    config = {k: saved_cfg.get(k) for k in rel_cfg_keys if k in saved_cfg}
    if family == "gemma3":
        config["layer_types"] = saved_cfg.get("layer_types")
        config["sliding_window_pattern"] = saved_cfg.get("sliding_window_pattern",
                                                         saved_cfg.get("_sliding_window_pattern"))
    out = {
        "arch": spec["gguf_arch"],
        "family": family,
        "hf_class": spec["hf_class"],
        "config": config,
        "hf_config_json": saved_cfg,
        "init": init,
        "tokens": tokens,
        "n_vocab": VOCAB,
        "stats": stats,
        "sensitivity_max_abs_diff": sens,
        "logits": [[sig6(x) for x in row] for row in logits.tolist()],
    }
    for k, v in extra.items():
        out[k] = [[sig6(x) for x in row] for row in v.tolist()]

    if llama_exe is not None:
        lc, info = llamacpp_logits(llama_exe, gguf_path, tokens, VOCAB)
        d = float(np.abs(lc - logits).max())
        out["llamacpp_max_abs_diff"] = d
        out["llamacpp_info"] = info
        msg = f"{family}: llama.cpp max |diff| vs HF = {d:.3g} ({info})"
        if "logits_full_attention" in extra:
            d2 = float(np.abs(lc - extra["logits_full_attention"]).max())
            out["llamacpp_max_abs_diff_vs_full_attention"] = d2
            msg += f"; vs full-attention HF = {d2:.3g}"
        log(msg)

    out["generator"] = {
        "script": "scripts/gen_arch_golden.py",
        "command": ".venv-ref/bin/python scripts/gen_arch_golden.py",
        "seed": SEED,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "llama_cpp_source": f"llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist, vendor/llama.cpp",
        "converter": "convert_hf_to_gguf.py --outtype f32",
        "hf_dtype": "float32", "attn_implementation": "eager",
        "tokenizer": f"sentencepiece unigram with byte fallback (256 <0xNN> pieces), vocab {VOCAB}, trained on seeded generated text",
        "converter_log": conv_log,
    }
    (OUT_DIR / f"{family}.json").write_text(json.dumps(out, separators=(",", ":")) + "\n")
    return out


BEGIN = "<!-- BEGIN GENERATED (scripts/gen_arch_golden.py) -->"
END = "<!-- END GENERATED -->"


def update_readme(families: list[str]):
    readme = OUT_DIR / "README.md"
    text = readme.read_text() if readme.is_file() else f"# Architecture goldens\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    parts = ["## GGUF contents (generated)\n",
             "Tensor shapes are GGUF/ggml order (ne0 first: the fastest-varying dimension). "
             "Token arrays are summarised.\n"]
    for fam in FAMILIES:
        p = OUT_DIR / f"{fam}.gguf"
        j = OUT_DIR / f"{fam}.json"
        if not p.is_file() or not j.is_file():
            continue
        meta = json.loads(j.read_text())
        kv, tensors = describe_gguf(p)
        parts.append(f"\n### {fam} (`{fam}.gguf`, {p.stat().st_size} bytes)\n")
        line = f"HF `{meta['hf_class']}` -> GGUF `{meta['arch']}`; logit std {meta['stats']['logit_std']:.2f}, " \
               f"{meta['stats']['distinct_top1']} distinct top-1 tokens over {len(meta['tokens'])} positions"
        if "llamacpp_max_abs_diff" in meta:
            line += f"; llama.cpp max |diff| vs HF: {meta['llamacpp_max_abs_diff']:.3g}"
        if "llamacpp_max_abs_diff_vs_full_attention" in meta:
            line += f" (vs HF with sliding_window=None: {meta['llamacpp_max_abs_diff_vs_full_attention']:.3g})"
        parts.append(line + ".\n\n")
        parts.append("| key | value |\n|---|---|\n")
        for k, v in kv:
            parts.append(f"| `{k}` | `{v}` |\n".replace("||", "| |"))
        parts.append("\n| tensor | shape | type |\n|---|---|---|\n")
        for n, s, t in tensors:
            parts.append(f"| `{n}` | {s} | {t} |\n")
    gen = "".join(parts)
    pre, rest = text.split(BEGIN, 1)
    post = rest.split(END, 1)[1] if END in rest else "\n"
    readme.write_text(pre + BEGIN + "\n" + gen + END + post)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("families", nargs="*", help=f"subset of {list(FAMILIES)} (default: all)")
    ap.add_argument("--no-llamacpp", action="store_true", help="skip the llama.cpp cross-check")
    ap.add_argument("--keep-hf", type=Path, help="also keep the HF checkpoints in this directory")
    ap.add_argument("--readme-only", action="store_true", help="only regenerate the README section")
    ap.add_argument("--fixtures-only", action="store_true",
                    help="only rewrite tests/fixtures/gguf/arch/ from the existing GGUFs")
    args = ap.parse_args()
    fams = args.families or list(FAMILIES)
    for f in fams:
        if f not in FAMILIES:
            ap.error(f"unknown family {f}")
    if not (LLAMA_SRC / "convert_hf_to_gguf.py").is_file():
        sys.exit(f"{LLAMA_SRC} missing: run scripts/setup_reference_env.sh first")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    if args.fixtures_only:
        malformed_fixtures()
        return
    if not args.readme_only:
        torch.set_num_threads(2)
        rng = random.Random(SEED)
        tokens = [rng.randrange(3, VOCAB) for _ in range(N_TOKENS)]
        exe = None if args.no_llamacpp else llama_tool()
        if args.keep_hf:
            args.keep_hf.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="arch-tok-") as td:
            tok = train_tokenizer(Path(td), VOCAB)
            if args.keep_hf:
                shutil.copy(tok, args.keep_hf / "tokenizer.model")
            for f in fams:
                log(f"--- {f}")
                generate(f, FAMILIES[f], tok, tokens, exe, args.keep_hf)
        malformed_fixtures()
    update_readme(fams)


if __name__ == "__main__":
    main()
