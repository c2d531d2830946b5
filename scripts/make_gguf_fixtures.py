#!/usr/bin/env python3
"""Writes the GGUF test fixtures under tests/fixtures/gguf/.

Two families (see docs/security.md, GGUF part):

* Malformed files, one per class of structural problem (classes 1-6). Each must be rejected by
  gguf::File::Open with a qevict::Error whose message contains the substring listed for it in
  tests/fixtures/gguf/expected.txt.
* tiny_llama_valid.gguf, a complete, structurally valid llama model (F32, one layer, 300-token
  byte-level BPE vocabulary), and mutated copies under semantic/ that are valid GGUF but describe
  a broken model (class 7). The model loader and tokenizer must reject those; the substrings in
  semantic/expected.txt are the messages the loader is expected to give.

Pure Python 3 (struct only). Output is deterministic: running it twice gives identical bytes.
Usage: python3 scripts/make_gguf_fixtures.py [output_dir]
"""

import os
import random
import struct
import sys

# Metadata value type ids.
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = (
    range(13))
SCALAR_FORMAT = {
    UINT8: "B", INT8: "b", UINT16: "H", INT16: "h", UINT32: "I", INT32: "i", FLOAT32: "f",
    BOOL: "B", UINT64: "Q", INT64: "q", FLOAT64: "d",
}
# Tensor type ids.
F32, Q4_0 = 0, 2

U64_MAX = 2**64 - 1


# --- Encoding -------------------------------------------------------------------------------

def u32(v, endian="<"):
    return struct.pack(endian + "I", v)


def u64(v, endian="<"):
    return struct.pack(endian + "Q", v)


def gguf_str(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return u64(len(b)) + b


def value(vtype, v):
    """Type id + payload of a scalar or string value."""
    if vtype == STRING:
        return u32(STRING) + gguf_str(v)
    return u32(vtype) + struct.pack("<" + SCALAR_FORMAT[vtype], v)


def array(elem_type, items):
    payload = u32(ARRAY) + u32(elem_type) + u64(len(items))
    if elem_type == STRING:
        return payload + b"".join(gguf_str(s) for s in items)
    return payload + b"".join(struct.pack("<" + SCALAR_FORMAT[elem_type], x) for x in items)


def kv(key, encoded_value):
    return gguf_str(key) + encoded_value


def header(n_tensors, n_kv, version=3, magic=b"GGUF"):
    return magic + u32(version) + u64(n_tensors) + u64(n_kv)


def tensor_info(name, ne, ttype, offset):
    return gguf_str(name) + u32(len(ne)) + b"".join(u64(d) for d in ne) + u32(ttype) + u64(offset)


def align_up(n, alignment):
    return (n + alignment - 1) // alignment * alignment


def f32_tensor_bytes(ne):
    count = 1
    for d in ne:
        count *= d
    return 4 * count


def build(kvs, tensors, alignment=32):
    """A complete file. kvs: list of (key, encoded value). tensors: list of dicts with name, ne,
    type, data (bytes), and optionally offset (default: packed in order, aligned)."""
    out = bytearray(header(len(tensors), len(kvs)))
    for key, encoded in kvs:
        out += kv(key, encoded)
    offsets = []
    next_offset = 0
    for t in tensors:
        offset = t.get("offset", next_offset)
        offsets.append(offset)
        next_offset = align_up(offset + len(t["data"]), alignment)
        out += tensor_info(t["name"], t["ne"], t["type"], offset)
    if not tensors:
        return bytes(out)
    out += b"\0" * (align_up(len(out), alignment) - len(out))
    data_start = len(out)
    for t, offset in zip(tensors, offsets):
        end = data_start + offset + len(t["data"])
        if len(out) < end:
            out += b"\0" * (end - len(out))
        out[data_start + offset:end] = t["data"]
    return bytes(out)


def f32_tensor(name, ne, fill=0.5):
    n = f32_tensor_bytes(ne) // 4
    return {"name": name, "ne": ne, "type": F32, "data": struct.pack("<%df" % n, *([fill] * n))}


# --- Malformed fixtures (classes 1-6) ------------------------------------------------------

def with_kv(encoded_key_value, n_kv=1, trailing=b""):
    return header(0, n_kv) + encoded_key_value + trailing


def with_tensor_infos(infos, kvs=(), data=b"", pad=True):
    out = header(len(infos), len(kvs)) + b"".join(kv(k, v) for k, v in kvs) + b"".join(infos)
    if pad:
        out += b"\0" * (align_up(len(out), 32) - len(out))
    return out + data


def malformed_fixtures():
    """(file name, bytes, expected error substring) for every structural class."""
    ok_kv = kv("general.architecture", value(STRING, "llama"))
    f = []

    # 1. Header: magic, version, byte order.
    f.append(("empty_file.gguf", b"", "file is empty"))
    f.append(("too_small.gguf", b"GG", "too small to be GGUF"))
    f.append(("bad_magic.gguf", header(0, 0, magic=b"GGML"), "bad magic 'GGML'"))
    f.append(("truncated_header.gguf", b"GGUF" + u32(3) + b"\0\0\0\0", "truncated GGUF header"))
    f.append(("version_1.gguf", header(0, 0, version=1), "GGUF version 1 is not supported"))
    f.append(("version_4.gguf", header(0, 0, version=4), "unsupported GGUF version 4"))
    big_endian = b"GGUF" + u32(3, ">") + u64(0, ">") + u64(1, ">") + (
        struct.pack(">Q", 4) + b"name" + struct.pack(">I", UINT32) + struct.pack(">I", 7))
    f.append(("big_endian.gguf", big_endian, "big-endian GGUF files are not supported"))

    # 2. Counts and lengths beyond the bytes present, or overflowing when multiplied.
    f.append(("n_kv_overflow.gguf", header(0, U64_MAX) + ok_kv, "n_kv = 18446744073709551615"))
    n_tensors_huge = header(2**60, 0)
    n_tensors_huge += b"\0" * (100 - len(n_tensors_huge))
    f.append(("n_tensors_huge.gguf", n_tensors_huge, "n_tensors = 1152921504606846976"))
    f.append(("truncated_metadata.gguf",
              header(0, 1) + gguf_str("general.name") + u32(UINT64) + b"\1\2",
              "unexpected end of file reading uint64 value"))
    f.append(("string_len_beyond_file.gguf",
              with_kv(gguf_str("general.name") + u32(STRING) + u64(1000000) + b"tiny"),
              "string length 1000000"))
    f.append(("key_too_long.gguf", header(0, 1) + u64(70000) + b"k" * 64,
              "over the limit of 65535"))
    f.append(("key_not_printable.gguf", with_kv(kv("general.\x01name", value(UINT8, 1))),
              "not printable ASCII"))
    f.append(("array_len_overflow.gguf",
              with_kv(gguf_str("a") + u32(ARRAY) + u32(UINT32) + u64(2**62), trailing=b"\0" * 16),
              "array of 4611686018427387904 uint32 elements"))
    f.append(("string_array_len_beyond_file.gguf",
              with_kv(gguf_str("tokenizer.ggml.tokens") + u32(ARRAY) + u32(STRING) + u64(2**40) +
                      gguf_str("a") + gguf_str("b")),
              "array of 1099511627776 string elements"))

    # 3. Value types, bools, keys.
    f.append(("unknown_value_type.gguf", with_kv(gguf_str("x") + u32(13) + u32(0)),
              "unknown value type 13"))
    f.append(("unknown_array_type.gguf", with_kv(gguf_str("x") + u32(ARRAY) + u32(99) + u64(0)),
              "unknown array element type 99"))
    f.append(("nested_array.gguf",
              with_kv(gguf_str("x") + u32(ARRAY) + u32(ARRAY) + u64(1) + u32(UINT8) + u64(0)),
              "nested arrays are not supported"))
    f.append(("bad_bool.gguf",
              with_kv(gguf_str("tokenizer.ggml.add_bos_token") + u32(BOOL) + b"\2"),
              "bool value 2"))
    f.append(("bad_bool_in_array.gguf",
              with_kv(gguf_str("flags") + u32(ARRAY) + u32(BOOL) + u64(3) + b"\0\1\7"),
              "bool value 7"))
    f.append(("empty_key.gguf", with_kv(kv("", value(UINT32, 1))), "empty key"))
    f.append(("duplicate_key.gguf",
              header(0, 2) + kv("llama.block_count", value(UINT32, 1)) +
              kv("llama.block_count", value(UINT32, 2)),
              "duplicate key"))

    # 4. Type confusion detected while parsing (general.alignment); the others are caught by the
    #    typed getters, see semantic/block_count_as_string.gguf.
    f.append(("alignment_wrong_type.gguf", with_kv(kv("general.alignment", value(UINT64, 32))),
              "'general.alignment' has type uint64, expected uint32"))

    # 5. Alignment values.
    f.append(("alignment_zero.gguf", with_kv(kv("general.alignment", value(UINT32, 0))),
              "general.alignment is 0"))
    f.append(("alignment_not_pow2.gguf", with_kv(kv("general.alignment", value(UINT32, 48))),
              "general.alignment is 48"))
    f.append(("alignment_huge.gguf", with_kv(kv("general.alignment", value(UINT32, 2**31))),
              "over the limit of 1048576"))

    # 6. Tensor infos and data layout.
    data64 = b"\0" * 64
    f.append(("tensor_name_empty.gguf",
              with_tensor_infos([tensor_info("", [16], F32, 0)], data=data64),
              "empty tensor name"))
    f.append(("tensor_name_too_long.gguf",
              with_tensor_infos([tensor_info("t" * 64, [16], F32, 0)], data=data64),
              "over the limit of 63"))
    f.append(("tensor_name_duplicate.gguf",
              with_tensor_infos([tensor_info("w", [16], F32, 0), tensor_info("w", [16], F32, 64)],
                                data=data64 * 2),
              "duplicate tensor name"))
    f.append(("tensor_ndims_5.gguf",
              with_tensor_infos([tensor_info("w", [16, 1, 1, 1, 1], F32, 0)], data=data64),
              "n_dims is 5"))
    f.append(("tensor_ndims_0.gguf",
              with_tensor_infos([tensor_info("w", [], F32, 0)], data=data64), "n_dims is 0"))
    f.append(("tensor_dim_zero.gguf",
              with_tensor_infos([tensor_info("w", [16, 0], F32, 0)], data=data64),
              "dimension 1 is 0"))
    f.append(("tensor_dim_negative.gguf",
              with_tensor_infos([tensor_info("w", [2**64 - 5], F32, 0)], data=data64),
              "dimension 0 is -5"))
    f.append(("tensor_nelements_overflow.gguf",
              with_tensor_infos([tensor_info("w", [2**32, 2**32], F32, 0)], data=data64),
              "element count overflows int64"))
    f.append(("tensor_nbytes_overflow.gguf",
              with_tensor_infos([tensor_info("w", [2**62], F32, 0)], data=data64),
              "byte size of shape [4611686018427387904] of type F32 overflows"))
    f.append(("tensor_unknown_type.gguf",
              with_tensor_infos([tensor_info("w", [16], 99, 0)], data=data64),
              "unknown or unsupported tensor type id 99"))
    f.append(("tensor_deprecated_type.gguf",  # 4 was Q4_2, removed from ggml
              with_tensor_infos([tensor_info("w", [32], 4, 0)], data=data64),
              "unknown or unsupported tensor type id 4"))
    f.append(("tensor_row_not_block_multiple.gguf",
              with_tensor_infos([tensor_info("w", [48, 2], Q4_0, 0)], data=data64),
              "is not a multiple of the Q4_0 block size 32"))
    f.append(("tensor_offset_misaligned.gguf",
              with_tensor_infos([tensor_info("w", [4], F32, 8)], data=data64),
              "data offset 8 is not a multiple of the alignment 32"))
    f.append(("tensor_overlap.gguf",
              with_tensor_infos([tensor_info("a", [16], F32, 0), tensor_info("b", [16], F32, 32)],
                                data=data64 * 2),
              "overlap"))
    f.append(("tensor_beyond_eof.gguf",
              with_tensor_infos([tensor_info("w", [64], F32, 0)], data=data64),
              "extends past the end of the file"))
    f.append(("tensor_offset_huge.gguf",
              with_tensor_infos([tensor_info("w", [16], F32, 2**63)], data=data64),
              "extends past the end of the file"))
    f.append(("data_section_beyond_eof.gguf",
              with_tensor_infos([tensor_info("w", [1], F32, 0)], pad=False),
              "data section starts at byte offset"))
    f.append(("truncated_tensor_info.gguf",
              header(1, 0) + gguf_str("blk.0.attn_q.weight.with.a.long.name") + u32(2) + u64(64),
              "unexpected end of file reading tensor dimension"))
    return f


# --- Tiny llama model and semantic mutations (class 7) -------------------------------------

EMBED = 64
N_HEAD = 2
N_HEAD_KV = 1
HEAD_DIM = EMBED // N_HEAD
FFN = 128
VOCAB = 300
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOKEN_TYPE_NORMAL, TOKEN_TYPE_CONTROL = 1, 3
MERGE_WORDS = ["the", "and", "hello", "world", "to", "of", "in", "is", "cache", "token", "model",
               "key", "value", "attention", "layer"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def byte_to_char():
    """Byte-level BPE's map from bytes to characters: printable bytes stand for themselves; the
    others are shifted, in byte order, to code points from 256 up (so the space is U+0120)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) +
                 list(range(ord("\xae"), ord("\xff") + 1)))
    chars = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + shifted)
            shifted += 1
    return printable, chars


def byte_level_alphabet():
    """The 256 single-byte tokens in the usual vocabulary order: printable bytes first."""
    printable, chars = byte_to_char()
    return [chars[b] for b in printable] + [chars[b] for b in range(256) if b not in printable]


def tiny_vocab():
    """(tokens, token types, merges): specials, 256 byte tokens, then merged words."""
    tokens = SPECIAL_TOKENS + byte_level_alphabet()
    known = set(tokens)
    merges = []
    space_char = byte_to_char()[1][ord(" ")]
    for word in MERGE_WORDS:
        symbols = [space_char] + list(word)
        current = symbols[0]
        for nxt in symbols[1:]:
            merged = current + nxt
            if merged not in known:
                if len(tokens) == VOCAB:
                    break
                merges.append(current + " " + nxt)
                tokens.append(merged)
                known.add(merged)
            current = merged
    assert len(tokens) == VOCAB, len(tokens)
    types = [TOKEN_TYPE_CONTROL] * len(SPECIAL_TOKENS) + [TOKEN_TYPE_NORMAL] * (
        VOCAB - len(SPECIAL_TOKENS))
    return tokens, types, merges


def random_f32(rng, ne, scale):
    n = f32_tensor_bytes(ne) // 4
    return struct.pack("<%df" % n, *[rng.uniform(-scale, scale) for _ in range(n)])


def tiny_llama_parts():
    """Editable description of the valid model: ordered metadata and tensors."""
    tokens, types, merges = tiny_vocab()
    meta = [
        ("general.architecture", value(STRING, "llama")),
        ("general.name", value(STRING, "qevict tiny llama fixture")),
        ("general.file_type", value(UINT32, 0)),
        ("llama.block_count", value(UINT32, 1)),
        ("llama.context_length", value(UINT32, 256)),
        ("llama.embedding_length", value(UINT32, EMBED)),
        ("llama.feed_forward_length", value(UINT32, FFN)),
        ("llama.attention.head_count", value(UINT32, N_HEAD)),
        ("llama.attention.head_count_kv", value(UINT32, N_HEAD_KV)),
        ("llama.rope.freq_base", value(FLOAT32, 10000.0)),
        ("llama.attention.layer_norm_rms_epsilon", value(FLOAT32, 1e-5)),
        ("llama.vocab_size", value(UINT32, VOCAB)),
        ("llama.rope.dimension_count", value(UINT32, HEAD_DIM)),
        ("tokenizer.ggml.model", value(STRING, "gpt2")),
        ("tokenizer.ggml.pre", value(STRING, "smollm")),
        ("tokenizer.ggml.tokens", array(STRING, tokens)),
        ("tokenizer.ggml.token_type", array(INT32, types)),
        ("tokenizer.ggml.merges", array(STRING, merges)),
        ("tokenizer.ggml.bos_token_id", value(UINT32, 1)),
        ("tokenizer.ggml.eos_token_id", value(UINT32, 2)),
        ("tokenizer.ggml.padding_token_id", value(UINT32, 2)),
        ("tokenizer.ggml.add_bos_token", value(BOOL, 0)),
        ("tokenizer.chat_template", value(STRING, CHAT_TEMPLATE)),
        ("general.quantization_version", value(UINT32, 2)),
    ]
    rng = random.Random(20240611)
    shapes = [  # ggml order: ne[0] is the input (row) length
        ("token_embd.weight", [EMBED, VOCAB], 0.1),
        ("blk.0.attn_norm.weight", [EMBED], None),
        ("blk.0.attn_q.weight", [EMBED, N_HEAD * HEAD_DIM], 0.1),
        ("blk.0.attn_k.weight", [EMBED, N_HEAD_KV * HEAD_DIM], 0.1),
        ("blk.0.attn_v.weight", [EMBED, N_HEAD_KV * HEAD_DIM], 0.1),
        ("blk.0.attn_output.weight", [N_HEAD * HEAD_DIM, EMBED], 0.1),
        ("blk.0.ffn_norm.weight", [EMBED], None),
        ("blk.0.ffn_gate.weight", [EMBED, FFN], 0.1),
        ("blk.0.ffn_up.weight", [EMBED, FFN], 0.1),
        ("blk.0.ffn_down.weight", [FFN, EMBED], 0.1),
        ("output_norm.weight", [EMBED], None),
    ]
    tensors = []
    for name, ne, scale in shapes:
        if scale is None:  # RMS norm weights: around 1
            norm = [1.0 + rng.uniform(-0.05, 0.05) for _ in range(ne[0])]
            data = struct.pack("<%df" % ne[0], *norm)
        else:
            data = random_f32(rng, ne, scale)
        tensors.append({"name": name, "ne": ne, "type": F32, "data": data})
    return meta, tensors


def set_meta(meta, key, encoded):
    for i, (k, _) in enumerate(meta):
        if k == key:
            meta[i] = (key, encoded)
            return
    meta.append((key, encoded))


def replace_tensor(tensors, name, ne, fill=0.01):
    for i, t in enumerate(tensors):
        if t["name"] == name:
            tensors[i] = f32_tensor(name, ne, fill)
            return
    raise KeyError(name)


def semantic_fixtures():
    """(file name, bytes, expected substring, what is wrong) for each class-7 mutation."""
    out = []

    def mutation(file_name, expected, description, mutate):
        meta, tensors = tiny_llama_parts()
        mutate(meta, tensors)
        out.append((file_name, build(meta, tensors), expected, description))

    mutation("shape_mismatch.gguf", "blk.0.attn_q.weight",
             "attn_q is [64, 48] instead of [64, 64]",
             lambda m, t: replace_tensor(t, "blk.0.attn_q.weight", [EMBED, 48]))
    mutation("missing_tensor.gguf", "blk.0.ffn_down.weight", "no blk.0.ffn_down.weight",
             lambda m, t: t.remove(next(x for x in t if x["name"] == "blk.0.ffn_down.weight")))
    mutation("zero_heads.gguf", "head_count", "llama.attention.head_count = 0",
             lambda m, t: set_meta(m, "llama.attention.head_count", value(UINT32, 0)))

    def not_divisible(m, t):
        set_meta(m, "llama.attention.head_count", value(UINT32, 3))
        set_meta(m, "llama.attention.head_count_kv", value(UINT32, 2))
    mutation("head_count_not_divisible.gguf", "head_count",
             "head_count 3 is not a multiple of head_count_kv 2 (nor divides 64)", not_divisible)
    mutation("absurd_block_count.gguf", "block_count", "llama.block_count = 1000000",
             lambda m, t: set_meta(m, "llama.block_count", value(UINT32, 1000000)))

    def head_dim(m, t):
        set_meta(m, "llama.attention.key_length", value(UINT32, 48))
        set_meta(m, "llama.attention.value_length", value(UINT32, 48))
    mutation("head_dim_inconsistent.gguf", "'blk.0.attn_q.weight' has shape",
             "key_length/value_length 48 disagree with embedding_length/head_count = 32 and the "
             "tensor shapes", head_dim)
    mutation("vocab_size_mismatch.gguf", "tokenizer has 300 tokens",
             "token_embd.weight has 310 rows but there are 300 tokens",
             lambda m, t: replace_tensor(t, "token_embd.weight", [EMBED, VOCAB + 10]))
    mutation("bos_out_of_vocab.gguf", "bos", "tokenizer.ggml.bos_token_id = 300 (vocab is 300)",
             lambda m, t: set_meta(m, "tokenizer.ggml.bos_token_id", value(UINT32, VOCAB)))

    def bad_merge(m, t):
        _, _, merges = tiny_vocab()
        set_meta(m, "tokenizer.ggml.merges", array(STRING, merges + ["\u0120qevict zzzz"]))
    mutation("merges_unknown_token.gguf", "merge",
             "last merge 'Ġqevict zzzz' names tokens that are not in the vocabulary", bad_merge)
    mutation("block_count_as_string.gguf",
             "metadata key 'llama.block_count' has type string, expected an integer",
             "llama.block_count stored as the string \"1\"",
             lambda m, t: set_meta(m, "llama.block_count", value(STRING, "1")))

    def llama3_scaling(low, high, factor):
        def mutate(m, t):
            set_meta(m, "llama.rope.scaling.type", value(STRING, "llama3"))
            set_meta(m, "llama.rope.scaling.factor", value(FLOAT32, factor))
            set_meta(m, "llama.rope.scaling.low_freq_factor", value(FLOAT32, low))
            set_meta(m, "llama.rope.scaling.high_freq_factor", value(FLOAT32, high))
        return mutate
    mutation("rope_llama3_high_below_low.gguf", "rope.scaling.high_freq_factor",
             "llama3 RoPE scaling with high_freq_factor 1 <= low_freq_factor 4 (the "
             "interpolation divides by their difference)", llama3_scaling(4.0, 1.0, 8.0))
    mutation("rope_llama3_zero_factor.gguf", "rope.scaling.factor",
             "llama3 RoPE scaling with factor 0", llama3_scaling(1.0, 4.0, 0.0))
    return out


# --- Output ---------------------------------------------------------------------------------

def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures", "gguf")
    semantic_dir = os.path.join(out_dir, "semantic")
    os.makedirs(semantic_dir, exist_ok=True)

    manifest = [
        "# Malformed GGUF fixtures written by scripts/make_gguf_fixtures.py.",
        "# Each line: <file> <substring the gguf::File::Open error message must contain>",
    ]
    for name, data, expected in malformed_fixtures():
        write(os.path.join(out_dir, name), data)
        manifest.append("%s %s" % (name, expected))
    write(os.path.join(out_dir, "expected.txt"), ("\n".join(manifest) + "\n").encode())

    meta, tensors = tiny_llama_parts()
    write(os.path.join(out_dir, "tiny_llama_valid.gguf"), build(meta, tensors))

    manifest = [
        "# Structurally valid GGUF files describing a broken llama model (security.md class 7),",
        "# written by scripts/make_gguf_fixtures.py as mutations of ../tiny_llama_valid.gguf.",
        "# They parse as GGUF; loading them as a model (and tokenizer) must fail.",
        "# Each line: <file> <substring the loader's error message should contain>",
        "# (the substrings are those of the model and tokenizer loaders' messages).",
    ]
    for name, data, expected, description in semantic_fixtures():
        write(os.path.join(semantic_dir, name), data)
        manifest.append("# %s: %s" % (name, description))
        manifest.append("%s %s" % (name, expected))
    write(os.path.join(semantic_dir, "expected.txt"), ("\n".join(manifest) + "\n").encode())


if __name__ == "__main__":
    main()
