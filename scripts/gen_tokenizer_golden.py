#!/usr/bin/env python3
"""Generates the tokenizer golden files used by src/tokenizer/*_test.cc.

  tests/golden/tokenizer_smollm2.json  token ids of SmolLM2-135M-Instruct for ~100 texts (with
                                       and without special-token parsing) and chat renderings
                                       (jinja2 on the GGUF's own template) with their ids.
  tests/golden/tokenizer_pretok.json   pre-tokenizer splits (gpt2, llama-bpe, qwen2, smollm)
                                       from Hugging Face `tokenizers`, as byte-level strings.
  tests/golden/tokenizer_chat.json     Llama-3 / Llama-2 / Gemma / Phi-3 chat renderings by jinja2.
  tests/golden/tokenizer_spm.json      a tiny SentencePiece BPE model (byte fallback) trained
                                       here, its pieces/scores/types and sentencepiece's ids.
  tests/golden/tokenizer_gemma3.json   (--model gemma3 writes this file only) token ids of
                                       Gemma 3 270M from llama.cpp (llama-cpp-python,
                                       vocab_only) for ~170 texts, with and without special-token
                                       parsing, a few with BOS; see gemma3_main().

Reference for the ids: the Hugging Face tokenizer of the model. There is no network here, so it
is built from the GGUF with transformers (AutoTokenizer.from_pretrained(gguf_file=...)). That
conversion keeps vocab, merges and added tokens but gives every "gpt2" model the plain
ByteLevel pre-tokenizer, while SmolLM2's own tokenizer.json on the Hub uses
Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False, use_regex=True)] (what
tokenizer.ggml.pre = "smollm" stands for). The reference therefore is the converted tokenizer
with that pre-tokenizer put back. The unmodified conversion, and llama-cpp-python when
available, are cross-checked; disagreements are recorded in the JSON ("cross_checks").

Usage: python3 scripts/gen_tokenizer_golden.py [--llama-cpp-python /tmp/refvenv/bin/python]
       python3 scripts/gen_tokenizer_golden.py --model gemma3 \
           --llama-cpp-python third_party_build/llamacpp/venv-0.3.36/bin/python
"""
import argparse
import copy
import json
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_DIR = os.path.join(ROOT, "models")
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GOLDEN_DIR = os.path.join(ROOT, "tests", "golden")

GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")

# Llama 3.0 and Llama 2 chat templates as published in the models' tokenizer_config.json.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
# Gemma 3's instruction-tuned template (google/gemma-3-*-it tokenizer_config.json), text-only
# content: a system message is prefixed to the first user turn; roles must alternate.
GEMMA_TEMPLATE = (
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {{- message['content'] | trim -}}\n    {{ '<end_of_turn>\n' }}\n{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n    {{'<start_of_turn>model\n'}}\n{%- endif -%}\n")
# Phi-3's template (microsoft/Phi-3-mini-4k-instruct tokenizer_config.json).
PHI3_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}")
LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and "
    "system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}"
    "{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + "
    "eos_token }}{% endif %}{% endfor %}")

PYTHON_CODE = '''def fibonacci(n):
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


if __name__ == "__main__":
\tprint(fibonacci(10))  # 55
'''

CPP_CODE = '''#include <vector>

int main() {
  std::vector<int> v{1, 2, 3};
  for (int x : v) {
    if (x % 2 == 0) continue;   // skip evens
  }
  return 0;
}
'''

TEXTS = [
    "",
    "Hello world",
    "Hello, world! How are you doing today?",
    "The quick brown fox jumps over the lazy dog.",
    " leading space",
    "trailing space ",
    "trailing spaces   ",
    "  two leading spaces",
    "multiple   internal    spaces",
    "\n",
    "\n\n\n",
    "paragraph one\n\n\nparagraph two",
    "line1\r\nline2\r\n",
    "\tindented\twith\ttabs\t",
    "   \n   \n",
    PYTHON_CODE,
    CPP_CODE,
    '{"key": "value", "list": [1, 2, 3], "nested": {"a": null}}',
    "12345",
    "3.14159265358979",
    "The year 2024 had 366 days and 8784 hours.",
    "1,000,000 and 1.000.000 and 1 000 000",
    "x =  42",
    "  7 apples",
    "v2.0.1-rc3 0x1F 0b1010 1e-9",
    "12345678901234567890123456789012345678901234567890",
    "Call +1 (555) 123-4567 now",
    "I'm sure they'll say it's fine, don't you think? We've seen what you'd do.",
    "I'M SURE THEY'LL SAY IT'S FINE, DON'T",
    "rock 'n' roll ''quoted'' \"double\"",
    "Café naïve résumé façade Ångström",
    "日本語のテキストとカタカナ",
    "中文字符测试，还有标点符号。",
    "Emoji: 😀👍🏽🇺🇸 and ❤️ plus 👨‍👩‍👧",
    "مرحبا بالعالم",
    "e\u0301 a\u0300 combining marks n\u0303",
    "Ελληνικά και Русский текст",
    "हिन्दी और 한국어",
    "x² + y³ = z⁴, ½ + ¾, Ⅻ",
    "Arabic-Indic digits ٣٤٥ and full-width １２３",
    "non\u00a0breaking\u3000ideographic\u2028separator",
    "zero\u200bwidth\u200djoiner",
    "<|im_start|>user\nHi there!<|im_end|>\n",
    "text<|endoftext|>more text",
    "<|im_start|><|im_end|>",
    "<|im_start",
    "<repo_name>qevict<file_sep>src/main.cc<gh_stars>100",
    "<<|im_start|>>",
    "a",
    " ",
    "!",
    "é",
    "😀",
    "\t",
    "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "supercalifragilisticexpialidocious" * 8,
    "a" * 300,
    "https://example.com/path/to/page?query=1&other=two#anchor",
    "## Title\n\n- item 1\n- item 2\n\n> quote\n\n```python\nprint('hi')\n```\n",
    "user@example.com wrote: >>> see *this* and _that_ ~~strike~~",
    "Ends with newline\n",
    "--- === *** ... !!! ??? ;;;",
]

# Texts also encoded with special-token parsing off (control tokens become plain text).
NO_SPECIAL_TEXTS = [
    "<|im_start|>user\nHi there!<|im_end|>\n",
    "text<|endoftext|>more text",
    "<repo_name>qevict<file_sep>",
    "Hello world",
]

RANDOM_POOL = [
    "a", "b", "s", "t", "S", "T", "x", "é", "中", "ß", "ſ", "Ω", "1", "2", "9", "٣", "²", "½", "Ⅻ",
    " ", " ", " ", " ", "\n", "\n", "\r", "\t", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\x85",
    "\x1c", "\u200b", "'", "'", "!", ".", "-", "_", "(", "😀", "\u0301", '"', "<", "|", "re", "ll",
    "ve", "D", "M",
]


def random_texts(count, seed, pool):
    rng = random.Random(seed)
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 24))) for _ in range(count)]


def load_hf_tokenizers():
    from tokenizers import pre_tokenizers
    from transformers import AutoTokenizer

    converted = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=MODEL_FILE)
    reference = copy.deepcopy(converted.backend_tokenizer)
    reference.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    return converted, reference


def hf_encode(backend, text, parse_special):
    # tokenizers always matches added tokens; encoding with parse_special off goes through a
    # copy whose added tokens are not special-cased (encode_special_tokens).
    if parse_special:
        return backend.encode(text, add_special_tokens=False).ids
    backend.encode_special_tokens = True
    try:
        return backend.encode(text, add_special_tokens=False).ids
    finally:
        backend.encode_special_tokens = False


def llama_cpp_ids(python, cases, model_file=MODEL_FILE):
    """Token ids from llama-cpp-python (run in its own venv), or None when unavailable. A case
    may set "add_bos" (default false)."""
    if not python or not os.path.exists(python):
        return None
    program = r'''
import json, sys
import llama_cpp
cases = json.load(sys.stdin)
llm = llama_cpp.Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
out = [llm.tokenize(c["text"].encode("utf-8"), add_bos=c.get("add_bos", False),
                   special=c["parse_special"]) for c in cases]
json.dump(out, sys.stdout)
'''
    try:
        result = subprocess.run([python, "-c", program, os.path.join(MODEL_DIR, model_file)],
                                input=json.dumps(cases), capture_output=True, text=True,
                                timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        print("llama-cpp-python unavailable:", e, file=sys.stderr)
        return None
    if result.returncode != 0:
        print("llama-cpp-python unavailable:", result.stderr.strip().splitlines()[-1:],
              file=sys.stderr)
        return None
    return json.loads(result.stdout)


def render_jinja(template, messages, add_generation_prompt, bos_token="", eos_token=""):
    """Renders like transformers' apply_chat_template (trim_blocks, lstrip_blocks)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages,
                                            add_generation_prompt=add_generation_prompt,
                                            bos_token=bos_token, eos_token=eos_token)


def chat_template_from_gguf():
    import gguf
    reader = gguf.GGUFReader(os.path.join(MODEL_DIR, MODEL_FILE))
    field = reader.fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def conversations():
    return [
        ([{"role": "user", "content": "Hello!"}], True),
        ([{"role": "user", "content": "Hello!"}], False),
        ([{"role": "system", "content": "You are a pirate."},
          {"role": "user", "content": "What is 2+2?"}], True),
        ([{"role": "user", "content": "Write a haiku about the sea."},
          {"role": "assistant", "content": "Waves fold into foam,\nsalt wind carries gull voices,"
                                           "\nthe tide keeps its time."},
          {"role": "user", "content": "  Now one about mountains.  "}], True),
        ([{"role": "system", "content": ""},
          {"role": "user", "content": "Empty system message, then unicode: café 日本 😀"}], True),
        ([], True),
        ([{"role": "user", "content": "Tabs\tand\nnewlines\n\n"},
          {"role": "assistant", "content": "\n Noted. \n"}], False),
        ([{"role": "user", "content": "\u3000\x1c\x85 edges of trim \u2003x\u00a0\u200b"}],
         True),
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--llama-cpp-python", default="/tmp/refvenv/bin/python",
                        help="a python with llama_cpp installed, for a cross-check (smollm2) or "
                             "the reference (gemma3)")
    parser.add_argument("--model", choices=["smollm2", "gemma3"], default="smollm2",
                        help="smollm2 (default): the four SmolLM2/pre-tokenizer/chat/spm files; "
                             "gemma3: tokenizer_gemma3.json only")
    args = parser.parse_args()
    os.makedirs(GOLDEN_DIR, exist_ok=True)
    if args.model == "gemma3":
        gemma3_main(args.llama_cpp_python)
        return

    converted, reference = load_hf_tokenizers()
    cases = [{"text": t, "parse_special": True} for t in TEXTS]
    cases += [{"text": t, "parse_special": False} for t in NO_SPECIAL_TEXTS]
    cases += [{"text": t, "parse_special": True} for t in random_texts(60, 1234, RANDOM_POOL + [
        "<|im_start|>", "<|endoftext|>", "1234"])]
    for case in cases:
        case["ids"] = hf_encode(reference, case["text"], case["parse_special"])
        decoded = reference.decode(case["ids"], skip_special_tokens=False)
        assert decoded == case["text"], (case["text"], decoded)

    cross_checks = []
    converted_mismatch = [c["text"] for c in cases
                          if hf_encode(converted.backend_tokenizer, c["text"], c["parse_special"])
                          != c["ids"]]
    cross_checks.append({
        "reference": "transformers GGUF conversion as is (ByteLevel pre-tokenizer only, no "
                     "Digits split)",
        "cases": len(cases), "disagreements": len(converted_mismatch),
        "disagreeing_texts": converted_mismatch,
        "explanation": "expected: without the Digits split, whitespace before a digit is split "
                       "by the GPT-2 regex (' ?\\p{N}+') instead of ending its own word"})
    llama_ids = llama_cpp_ids(args.llama_cpp_python,
                              [{"text": c["text"], "parse_special": c["parse_special"]}
                               for c in cases])
    if llama_ids is None:
        cross_checks.append({"reference": "llama-cpp-python", "status": "not available"})
    else:
        mismatch = [{"text": c["text"], "llama_cpp": ids}
                    for c, ids in zip(cases, llama_ids) if ids != c["ids"]]
        cross_checks.append({"reference": "llama-cpp-python (vocab_only, tokenize special=...)",
                             "cases": len(cases), "disagreements": len(mismatch),
                             "disagreeing": mismatch})
    for check in cross_checks:
        print("cross-check:", check["reference"], "->",
              check.get("disagreements", check.get("status")), file=sys.stderr)

    template = chat_template_from_gguf()
    chats = []
    for messages, add_generation_prompt in conversations():
        rendered = render_jinja(template, messages, add_generation_prompt)
        via_transformers = converted.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt) \
            if messages else rendered
        assert rendered == via_transformers, (rendered, via_transformers)
        chats.append({"messages": messages, "add_generation_prompt": add_generation_prompt,
                      "rendered": rendered, "ids": hf_encode(reference, rendered, True)})

    smollm2 = {
        "model": MODEL_FILE,
        "reference": "Hugging Face tokenizers: the transformers GGUF conversion of the model "
                     "(AutoTokenizer.from_pretrained(gguf_file=...)) with SmolLM2's Hub "
                     "pre-tokenizer Sequence[Digits(individual_digits=True), ByteLevel] restored",
        "versions": versions(),
        "cross_checks": cross_checks,
        "chat_template": template,
        "cases": cases,
        "chats": chats,
    }
    write_json("tokenizer_smollm2.json", smollm2)
    write_json("tokenizer_pretok.json", pretokenizer_goldens())
    write_json("tokenizer_chat.json", other_chat_goldens())
    write_json("tokenizer_spm.json", sentencepiece_goldens())


def pretokenizer_goldens():
    from tokenizers import Regex, pre_tokenizers as P

    def split_then_bytes(regex):
        return P.Sequence([P.Split(Regex(regex), behavior="isolated", invert=False),
                           P.ByteLevel(add_prefix_space=False, use_regex=False)])

    pre_tokenizers = {
        "gpt2": P.ByteLevel(add_prefix_space=False, use_regex=True),
        "llama-bpe": split_then_bytes(LLAMA3_REGEX),
        "qwen2": split_then_bytes(QWEN2_REGEX),
        "smollm": P.Sequence([P.Digits(individual_digits=True),
                              P.ByteLevel(add_prefix_space=False, use_regex=True)]),
    }
    inputs = TEXTS[1:] + [
        "x's X'S x'ſ x'Re x'LL x'vE x'd 'd", "don't DON'T Don'T", "a\n\n  b", "a \n\n b",
        " \r\n x", "\x1c\x1c y \x85\x85a", "\u3000\u3000a\u00a0b", "?!\n\n\nfoo", ". \n",
        "1234567 12 1", "  12", "a1b22c333d4444", "a  \t\n", "ab \n\t  ", "'''s", "''", "'",
    ] + random_texts(150, 99, RANDOM_POOL)
    goldens = {"regexes": {"gpt2": GPT2_REGEX, "llama-bpe": LLAMA3_REGEX, "qwen2": QWEN2_REGEX,
                           "smollm": "Digits(individual_digits=True) then ByteLevel(use_regex)"},
               "note": "words are byte-level (GPT-2 byte-to-unicode) strings",
               "versions": versions(), "cases": []}
    for text in inputs:
        case = {"text": text}
        for name, pre in pre_tokenizers.items():
            case[name] = [piece for piece, _ in pre.pre_tokenize_str(text)]
        goldens["cases"].append(case)
    return goldens


def other_chat_goldens():
    families = [("llama3", LLAMA3_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>"),
                ("llama2", LLAMA2_TEMPLATE, "<s>", "</s>"),
                ("gemma", GEMMA_TEMPLATE, "<bos>", "<eos>"),
                ("phi3", PHI3_TEMPLATE, "<s>", "<|endoftext|>")]
    out = {"note": "rendered by jinja2 as transformers' apply_chat_template does",
           "families": []}
    for name, template, bos, eos in families:
        renders = []
        for messages, add_generation_prompt in conversations():
            try:
                rendered = render_jinja(template, messages, add_generation_prompt, bos, eos)
            except Exception as e:  # the template raises (Llama-2: roles not alternating)
                rendered = None
                print(f"{name}: template raises: {e}", file=sys.stderr)
            renders.append({"messages": messages, "add_generation_prompt": add_generation_prompt,
                            "rendered": rendered})
        # Llama-2 and Gemma raise on roles that do not alternate.
        bad = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        if name in ("llama2", "gemma"):
            renders.append({"messages": bad, "add_generation_prompt": False, "rendered": None})
        out["families"].append({"name": name, "template": template, "bos_token": bos,
                                "eos_token": eos, "renders_bos": "bos_token" in template,
                                "chats": renders})
    return out


SPM_WORDS = ("the of and to in is you that it he was for on are as with his they at be this "
             "have from or one had by word but not what all were we when your can said there use "
             "an each which she do how their if will up other about out many then them these so "
             "some her would make like him into time has look two more write go see number no "
             "way could people my than first water been call who oil its now find long down day "
             "did get come made may part hello world tokenizer sentence piece merge").split()


def sentencepiece_goldens():
    """A small BPE model trained offline (Llama-style options: identity normalization, no
    whitespace collapsing, dummy prefix, byte fallback) and sentencepiece's own encodings."""
    import io
    import sentencepiece as spm

    rng = random.Random(7)
    corpus = []
    for _ in range(3000):
        words = [rng.choice(SPM_WORDS) for _ in range(rng.randint(3, 12))]
        if rng.random() < 0.3:
            words[0] = words[0].capitalize()
        corpus.append(" ".join(words) + rng.choice([".", ",", "!", "?", ""]))
    corpus += PYTHON_CODE.splitlines() * 20
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus), model_writer=model, vocab_size=600, model_type="bpe",
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, character_coverage=1.0, split_digits=False, unk_id=0, bos_id=1,
        eos_id=2, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else
                     6 if sp.is_byte(i) else 5 if sp.is_unused(i) else 1)
    texts = ["", "Hello world", "hello world", " hello", "hello ", "  two  spaces  ",
             "The time has come, people! Call them now?", "water\nfire\tearth",
             "unseen: 😀 日本 é ß", "x", " ", "Zebra quartz jumps", "numbers 12345 and 3.14",
             "a" * 50, PYTHON_CODE, "what would you make of it? One day, they said."]
    texts += random_texts(40, 5, RANDOM_POOL + [" the", " word", "hello"])
    cases = [{"text": t, "ids": sp.encode(t)} for t in texts]
    for case in cases:
        assert sp.decode(case["ids"]) == case["text"] or case["text"].startswith(" ")
    return {"reference": "sentencepiece %s, BPE model trained by this script" % spm.__version__,
            "add_space_prefix": True, "tokens": tokens, "scores": scores, "token_types": types,
            "unknown": 0, "bos": 1, "eos": 2, "cases": cases}


# --- Gemma 3 (SentencePiece vocab in the GGUF, tokenizer.ggml.model = "llama") -----------------

GEMMA3_SPECIAL_TEXTS = [
    "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nHi<end_of_turn>\n",
    "text<eos>more text",
    "<start_of_turn>",
    "<end_of_turn>",
    "<start_of_turn",
    "<<start_of_turn>>",
    "<pad><unk><mask><unused0><unused99>",
    "[multimodal]",
    "<start_of_image><end_of_image>",
    "<table><tr><td>1</td></tr></table>",
    "<h1>Title</h1>\n<p>para <b>bold</b></p>",
    "\t\tindented twice\n\t\t\tthree",
    "\n" * 34,
    "\t" * 40,
    "a\n\nb\n\n\nc",
    " \n \n ",
    "   three leading spaces",
    "word" + " " * 40 + "word",
    "private use \ue000\U000f0000 and controls \x00\x01\x7f",
    "rare CJK \U00020000\U0002a6d6 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "The 1st of 2,048 tokens: 3.5e-7, 0.000123, 123456789",
    "naïve coöperation — “quoted” ‘single’ … €100 £5 ¥3",
    "🙂🙃😉😊😇🥰😍🤩😘😗☺️😚😙🥲",
    "Once upon a time, in a small village by the sea, there lived",
    "def f(x):\n    return x ** 2  # square\n",
]

GEMMA3_NO_SPECIAL_TEXTS = [
    "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
    "text<eos>more text",
    "<bos>Hello",
    "<pad><unk><mask><unused0>",
    "<table><tr><td>1</td></tr></table>",
    "\t\tindented twice\n\n",
]

GEMMA3_BOS_TEXTS = ["", "Hello world", " Hello world", "<start_of_turn>user\nHi<end_of_turn>\n",
                    "<bos>Hello"]

LLAMA_CPP_VOCAB_INFO = r'''
import json, sys
import llama_cpp
llm = llama_cpp.Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
v = llama_cpp.llama_model_get_vocab(llm.model)
def tok(t):
    return None if t < 0 else {"id": t, "text": llm.detokenize([t], special=True).decode()}
n = llama_cpp.llama_vocab_n_tokens(v)
json.dump({"version": llama_cpp.__version__,
           "chat_template": llm.metadata.get("tokenizer.chat_template"),
           "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(v)),
           "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(v)),
           "add_space_prefix": llm.metadata.get("tokenizer.ggml.add_space_prefix"),
           "n_tokens": n,
           "bos": tok(llama_cpp.llama_vocab_bos(v)), "eos": tok(llama_cpp.llama_vocab_eos(v)),
           "eot": tok(llama_cpp.llama_vocab_eot(v)), "pad": tok(llama_cpp.llama_vocab_pad(v)),
           "nl": tok(llama_cpp.llama_vocab_nl(v)),
           "eog": [tok(t) for t in range(n) if llama_cpp.llama_vocab_is_eog(v, t)]}, sys.stdout)
'''


def gemma3_main(llama_python):
    """tokenizer_gemma3.json. The reference is llama.cpp's tokenizer (llama-cpp-python built
    from the same 0.3.36 source as the logits goldens, vocab_only). Each case records text,
    parse_special, add_bos and ids. Texts: the general TEXTS list (its SmolLM2 control tokens are
    plain text to Gemma), Gemma's control and user-defined tokens with special parsing on and
    off, a few with BOS, and random strings over a pool that includes Gemma's special tokens."""
    pool = RANDOM_POOL + ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<table>",
                          "\n\n", "\t\t", "1234", "▁", "  "]
    cases = [{"text": t, "parse_special": True, "add_bos": False} for t in TEXTS]
    cases += [{"text": t, "parse_special": True, "add_bos": False} for t in GEMMA3_SPECIAL_TEXTS]
    cases += [{"text": t, "parse_special": False, "add_bos": False}
              for t in GEMMA3_NO_SPECIAL_TEXTS + NO_SPECIAL_TEXTS]
    cases += [{"text": t, "parse_special": True, "add_bos": True} for t in GEMMA3_BOS_TEXTS]
    cases += [{"text": t, "parse_special": True, "add_bos": False}
              for t in random_texts(60, 4321, pool)]
    ids = llama_cpp_ids(llama_python, cases, GEMMA3_FILE)
    if ids is None:
        sys.exit("gemma3: llama-cpp-python is needed (--llama-cpp-python PYTHON)")
    for case, case_ids in zip(cases, ids):
        case["ids"] = case_ids
    result = subprocess.run([llama_python, "-c", LLAMA_CPP_VOCAB_INFO,
                             os.path.join(MODEL_DIR, GEMMA3_FILE)],
                            capture_output=True, text=True, timeout=600, check=True)
    info = json.loads(result.stdout)
    cross_checks = [hf_gemma3_cross_check(cases)]
    for check in cross_checks:
        print("cross-check:", check["reference"], "->",
              check.get("disagreements", check.get("status")), file=sys.stderr)
    write_json("tokenizer_gemma3.json", {
        "model": GEMMA3_FILE,
        "reference": "llama.cpp via llama-cpp-python %s: Llama(vocab_only=True).tokenize(text, "
                     "add_bos=case.add_bos, special=case.parse_special)" % info["version"],
        "vocab": info,
        "chat_template": info["chat_template"],
        "cross_checks": cross_checks,
        "cases": cases,
    })


def hf_gemma3_cross_check(cases):
    """Hugging Face tokenizers on transformers' GGUF conversion of the Gemma vocab, when
    transformers is importable (informative only: see "note")."""
    try:
        import transformers
        from transformers import AutoTokenizer
        backend = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=GEMMA3_FILE).backend_tokenizer
    except Exception as e:  # no transformers here, or no GGUF support for gemma3
        return {"reference": "transformers GGUF conversion", "status": "not available: %s" % e}
    mismatch = []
    for c in cases:
        ids = hf_encode(backend, c["text"], c["parse_special"])
        if c["add_bos"]:
            ids = [2] + ids
        if ids != c["ids"]:
            mismatch.append({"text": c["text"], "parse_special": c["parse_special"], "hf": ids})
    return {"reference": "transformers %s GGUF conversion (AutoTokenizer.from_pretrained("
                         "gguf_file=...).backend_tokenizer)" % transformers.__version__,
            "note": "informative only: transformers rebuilds Gemma's vocab from the GGUF as a "
                    "Unigram model over the piece scores, while Gemma 3's own tokenizer (and "
                    "llama.cpp's 'llama' SPM tokenizer) is BPE, so segmentations differ",
            "cases": len(cases), "disagreements": len(mismatch),
            "first_disagreeing": mismatch[:10]}


def versions():
    import jinja2
    import tokenizers
    import transformers
    return {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
            "jinja2": jinja2.__version__, "python": sys.version.split()[0]}


def write_json(name, data):
    path = os.path.join(GOLDEN_DIR, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", path, file=sys.stderr)


if __name__ == "__main__":
    main()
