#!/usr/bin/env python3
"""Writes the generated seeds of the gguf fuzz target into fuzz/corpus/gguf/.

Small but complete llama models (a few KB each, so the fuzzer mutates them quickly) that load
without error and reach different paths of the model validation and tokenizer: byte-level BPE
under several pre-tokenizers and SentencePiece vocabularies, tied and separate output weights,
F32, F16 and quantized tensors, RoPE scaling (linear, llama3 with rope_freqs.weight), explicit
head dimensions, a non-default alignment, and ChatML / Llama-3 / Llama-2 chat templates.
The small malformed fixtures of tests/fixtures/gguf/ are copied next to them.
Encoding helpers come from scripts/make_gguf_fixtures.py. Output is deterministic.
Usage: python3 fuzz/make_gguf_seeds.py
"""

import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_gguf_fixtures as g  # noqa: E402

F16, Q4_0, Q5_1, Q8_0 = 1, 2, 7, 8
BLOCK_BYTES = {Q4_0: 18, Q5_1: 24, Q8_0: 34}
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6
CHATML = ("{% for m in messages %}{% if loop.first and m['role'] != 'system' %}"
          "{{ '<|im_start|>system\\nYou are a seed.<|im_end|>\\n' }}{% endif %}"
          "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}")
LLAMA3 = ("{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
          "'<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}{% endfor %}")
LLAMA2 = ("{% for m in messages %}{% if m['role'] == 'user' %}{{ bos_token + '[INST] ' + "
          "m['content'] + ' [/INST]' }}{% elif m['role'] == 'system' %}{{ '<<SYS>>\\n' + "
          "m['content'] + '\\n<</SYS>>' }}{% else %}{{ ' ' + m['content'] + ' ' + eos_token }}"
          "{% endif %}{% endfor %}")


def bpe_vocab(specials, words, all_bytes=True):
    """Byte-level BPE tokens, types and merges: specials, single characters, merged words."""
    _, chars = g.byte_to_char()
    if all_bytes:
        singles = g.byte_level_alphabet()
    else:
        singles = sorted({chars[b] for w in words for b in (" " + w).encode()})
    tokens = list(specials) + singles
    known, merges = set(tokens), []
    for word in words:
        symbols = [chars[b] for b in (" " + word).encode()]
        current = symbols[0]
        for nxt in symbols[1:]:
            if current + nxt not in known:
                merges.append(current + " " + nxt)
                tokens.append(current + nxt)
                known.add(current + nxt)
            current += nxt
    types = [CONTROL] * len(specials) + [NORMAL] * (len(tokens) - len(specials))
    return tokens, types, merges


def spm_vocab():
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256
    pieces = ["\u2581", "\u2581t", "h", "e", "he", "\u2581the", "l", "o", "ll", "llo",
              "\u2581hello", "\u00e9", "\u4e2d\u6587", "[INST]"]
    tokens += pieces
    types += [NORMAL] * (len(pieces) - 1) + [USER_DEFINED]
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    return tokens, types, scores


def tensor(name, ne, ttype=g.F32, value=0.5):
    count = 1
    for d in ne:
        count *= d
    if ttype == g.F32:
        data = struct.pack("<%df" % count, *([value] * count))
    elif ttype == F16:
        data = struct.pack("<%de" % count, *([value] * count))
    else:  # quantized: zero blocks are valid
        data = bytes(count // 32 * BLOCK_BYTES[ttype])
    return {"name": name, "ne": ne, "type": ttype, "data": data}


def model(embd, heads, kv_heads, ffn, layers, n_vocab, matrix_type=g.F32, untied=False,
          head_dim=None, extra_tensors=()):
    hd = head_dim or embd // heads
    meta = [
        ("general.architecture", g.value(g.STRING, "llama")),
        ("llama.block_count", g.value(g.UINT32, layers)),
        ("llama.context_length", g.value(g.UINT32, 64)),
        ("llama.embedding_length", g.value(g.UINT32, embd)),
        ("llama.feed_forward_length", g.value(g.UINT32, ffn)),
        ("llama.attention.head_count", g.value(g.UINT32, heads)),
        ("llama.attention.head_count_kv", g.value(g.UINT32, kv_heads)),
    ]
    if head_dim:
        meta += [("llama.attention.key_length", g.value(g.UINT32, hd)),
                 ("llama.attention.value_length", g.value(g.UINT32, hd))]
    tensors = [tensor("token_embd.weight", [embd, n_vocab], matrix_type),
               tensor("output_norm.weight", [embd], g.F32, 1.0)]
    if untied:
        tensors.append(tensor("output.weight", [embd, n_vocab], matrix_type))
    for layer in range(layers):
        p = "blk.%d." % layer
        tensors += [
            tensor(p + "attn_norm.weight", [embd], g.F32, 1.0),
            tensor(p + "attn_q.weight", [embd, heads * hd], matrix_type),
            tensor(p + "attn_k.weight", [embd, kv_heads * hd], matrix_type),
            tensor(p + "attn_v.weight", [embd, kv_heads * hd], matrix_type),
            tensor(p + "attn_output.weight", [heads * hd, embd], matrix_type),
            tensor(p + "ffn_norm.weight", [embd], g.F32, 1.0),
            tensor(p + "ffn_gate.weight", [embd, ffn], matrix_type),
            tensor(p + "ffn_up.weight", [embd, ffn], matrix_type),
            tensor(p + "ffn_down.weight", [ffn, embd], matrix_type),
        ]
    return meta, tensors + list(extra_tensors)


def tokenizer_meta(model_name, pre, tokens, types, merges=None, scores=None, template=None,
                   bos=None, eos=None, add_bos=None):
    meta = [("tokenizer.ggml.model", g.value(g.STRING, model_name))]
    if pre:
        meta.append(("tokenizer.ggml.pre", g.value(g.STRING, pre)))
    meta += [("tokenizer.ggml.tokens", g.array(g.STRING, tokens)),
             ("tokenizer.ggml.token_type", g.array(g.INT32, types))]
    if merges is not None:
        meta.append(("tokenizer.ggml.merges", g.array(g.STRING, merges)))
    if scores is not None:
        meta.append(("tokenizer.ggml.scores", g.array(g.FLOAT32, scores)))
    if bos is not None:
        meta.append(("tokenizer.ggml.bos_token_id", g.value(g.UINT32, bos)))
    if eos is not None:
        meta.append(("tokenizer.ggml.eos_token_id", g.value(g.INT32, eos)))
    if add_bos is not None:
        meta.append(("tokenizer.ggml.add_bos_token", g.value(g.BOOL, add_bos)))
    if template is not None:
        meta.append(("tokenizer.chat_template", g.value(g.STRING, template)))
    return meta


def seeds():
    out = {}
    # Byte-level BPE with every byte, SmolLM2-like, ChatML with a default system message.
    tokens, types, merges = bpe_vocab(["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                      ["the", "hello", "world"])
    meta, tensors = model(8, 2, 1, 16, 1, len(tokens))
    meta += tokenizer_meta("gpt2", "smollm", tokens, types, merges, template=CHATML, bos=1, eos=2)
    out["mini_bpe_chatml.gguf"] = g.build(meta, tensors)

    # Few tokens, Llama-3 pre-tokenizer and template, llama3 RoPE scaling with rope_freqs,
    # explicit head dimension, separate output, alignment 64, F16 matrices.
    tokens, types, merges = bpe_vocab(["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>",
                                       "<|end_header_id|>"], ["hi", "it"], all_bytes=False)
    meta, tensors = model(8, 2, 2, 8, 1, len(tokens), F16, untied=True, head_dim=4,
                          extra_tensors=[tensor("rope_freqs.weight", [2], g.F32, 1.0)])
    meta += [("general.alignment", g.value(g.UINT32, 64)),
             ("llama.rope.dimension_count", g.value(g.UINT64, 4)),
             ("llama.rope.freq_base", g.value(g.FLOAT32, 500000.0)),
             ("llama.rope.scaling.type", g.value(g.STRING, "llama3")),
             ("llama.rope.scaling.factor", g.value(g.FLOAT32, 8.0)),
             ("llama.rope.scaling.original_context_length", g.value(g.UINT32, 32))]
    meta += tokenizer_meta("gpt2", "llama-bpe", tokens, types, merges, template=LLAMA3, bos=0,
                           eos=1, add_bos=True)
    out["mini_bpe_llama3.gguf"] = g.build(meta, tensors, alignment=64)

    # SentencePiece with byte fallback, Llama-2 template, two layers of Q8_0, linear RoPE.
    tokens, types, scores = spm_vocab()
    meta, tensors = model(32, 4, 2, 32, 2, len(tokens), Q8_0)
    meta += [("llama.rope.scaling.type", g.value(g.STRING, "linear")),
             ("llama.rope.scaling.factor", g.value(g.FLOAT64, 2.0)),
             ("llama.attention.layer_norm_rms_epsilon", g.value(g.FLOAT32, 1e-6))]
    meta += tokenizer_meta("llama", None, tokens, types, scores=scores, template=LLAMA2, bos=1,
                           eos=2)
    out["mini_spm_llama2.gguf"] = g.build(meta, tensors)

    # Qwen2 pre-tokenizer, ChatML without a default system, Q4_0 and untied Q5_1 output.
    tokens, types, merges = bpe_vocab(["<|im_start|>", "<|im_end|>"], ["ok", "no"],
                                      all_bytes=False)
    meta, tensors = model(32, 2, 1, 32, 1, len(tokens), Q4_0)
    tensors.append(tensor("output.weight", [32, len(tokens)], Q5_1))
    meta += tokenizer_meta("gpt2", "qwen2", tokens, types, merges,
                           template="{{ '<|im_start|>' + role + '\\n' }}", eos=1)
    out["mini_bpe_qwen2.gguf"] = g.build(meta, tensors)
    return out


def main():
    out_dir = os.path.join(ROOT, "fuzz", "corpus", "gguf")
    os.makedirs(out_dir, exist_ok=True)
    for name, data in sorted(seeds().items()):
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    fixtures = os.path.join(ROOT, "tests", "fixtures", "gguf")
    for name in sorted(os.listdir(fixtures)):
        path = os.path.join(fixtures, name)
        if name.endswith(".gguf") and os.path.getsize(path) <= 4096:
            shutil.copyfile(path, os.path.join(out_dir, name))


if __name__ == "__main__":
    main()
