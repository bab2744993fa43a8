#!/usr/bin/env python3
"""Independent float64 reference forward pass for Llama-family GGUF models.

Reads the GGUF with the `gguf` package only for its container parsing; every
tensor is dequantised here from its raw block bytes in float64 (F32, F16, BF16,
Q8_0, Q4_0, Q4_1), where d*q (+m) is exact; Q5_0, Q5_1, Q2_K..Q6_K and MXFP4 through
the gguf package's own dequantiser (gguf.quants.dequantize). Architectures: llama, mistral
(normal RoPE: adjacent pairs (x[2i], x[2i+1])), qwen2 (NeoX RoPE: pairs
(x[i], x[i+rot/2]), Q/K/V biases), qwen3 (NeoX, QK norm) and gemma3 (NeoX, QK
norm, embedding scale sqrt(dim), post-attention and post-FFN norms, GELU-tanh
FFN, every 6th layer global at rope.freq_base and the others sliding-window at
base 10000); llama3 RoPE frequency factors (rope_freqs.weight), sliding windows
(attention.sliding_window) and final logit soft-capping where the file has them.

CLI:
  reference.py MODEL --tokens 1,2,3 [--out FILE.npy]    logits for every position
  reference.py MODEL --compare HONE_LOGITS_FILE [--tol T]
      prints JSON {max_abs_diff, max_rel, argmax_agree, rows, ...}; with --tol,
      exit 1 when max_abs_diff > T or an argmax differs outside a near-tie.
  reference.py MODEL --tokens ... --greedy N             greedy-continue N tokens

Importable:
  m = ReferenceModel(path); logits = m.logits([1, 2, 3])   # float64 [T, n_vocab]
  compare(m, hone_logits_path) -> dict
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gguf  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402

from hone_logits import read_logits  # noqa: E402

NORMAL_ROPE_ARCHS = {"llama", "mistral"}
NEOX_ROPE_ARCHS = {"qwen2", "qwen3", "gemma3"}

# ------------------------------------------------------------------ dequantisation


def _f16(b):
    """uint8 [..., 2] -> float64 (exact)."""
    return np.ascontiguousarray(b).view("<f2")[..., 0].astype(np.float64)


def dequant_raw(raw, qtype, n_elem):
    """Dequantise a flat uint8 buffer of n_elem values to float64."""
    raw = np.ascontiguousarray(raw).reshape(-1)
    if qtype == QT.F32:
        return raw.view("<f4").astype(np.float64)
    if qtype == QT.F16:
        return raw.view("<f2").astype(np.float64)
    if qtype == QT.BF16:
        u = raw.view("<u2").astype(np.uint32) << 16
        return u.view(np.float32).astype(np.float64)
    if qtype == QT.Q8_0:
        blk = raw.reshape(-1, 34)
        d = _f16(blk[:, 0:2])
        q = blk[:, 2:34].view(np.int8).astype(np.float64)
        return (q * d[:, None]).reshape(-1)
    if qtype in (QT.Q4_0, QT.Q4_1):
        bs = 18 if qtype == QT.Q4_0 else 20
        blk = raw.reshape(-1, bs)
        d = _f16(blk[:, 0:2])
        qs = blk[:, bs - 16:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float64)  # j, j+16
        if qtype == QT.Q4_0:
            return ((q - 8.0) * d[:, None]).reshape(-1)
        m = _f16(blk[:, 2:4])
        return (q * d[:, None] + m[:, None]).reshape(-1)
    if QT(qtype) in GGUF_DEQUANT_TYPES:
        return dequant_gguf(raw, qtype, n_elem)
    raise NotImplementedError(f"reference: tensor type {QT(qtype).name} not supported")


# The further GGML formats go through the gguf package's own dequantiser (numpy, an
# implementation independent of Hone's C): its f32 values are exactly ggml's (each product of
# an f16 scale and small integers is exact; the min's subtraction, q5_1's addition and q6_K's
# second product are the one f32 rounding), widened to float64 without loss.
GGUF_DEQUANT_TYPES = {QT.Q5_0, QT.Q5_1, QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K, QT.MXFP4}


def dequant_gguf(raw, qtype, n_elem):
    out = gguf.quants.dequantize(np.ascontiguousarray(raw).reshape(1, -1), QT(qtype))
    out = np.asarray(out, dtype=np.float32).reshape(-1)
    assert out.size == n_elem, (QT(qtype).name, out.size, n_elem)
    return out.astype(np.float64)


def row_bytes(qtype, n_cols):
    bs, ts = gguf.GGML_QUANT_SIZES[QT(qtype)]
    assert n_cols % bs == 0, (qtype, n_cols)
    return n_cols // bs * ts


# ------------------------------------------------------------------ model


class ReferenceModel:
    def __init__(self, path, cache=False, dtype=np.float64):
        """dtype: compute precision (float64 is the reference; float32 is only used to
        estimate how far an f32 engine may legitimately drift)."""
        self.path = path
        self.dt = np.dtype(dtype)
        self.r = gguf.GGUFReader(path)
        self.t = {t.name: t for t in self.r.tensors}
        self.cache = {} if cache else None
        self.arch = self._field("general.architecture")
        a = self.arch
        if a in NORMAL_ROPE_ARCHS:
            self.neox = False
        elif a in NEOX_ROPE_ARCHS:
            self.neox = True
        else:
            raise NotImplementedError(f"reference: architecture {a!r} not supported")
        self.n_layer = int(self._field(f"{a}.block_count"))
        self.dim = int(self._field(f"{a}.embedding_length"))
        self.n_head = int(self._field(f"{a}.attention.head_count"))
        self.n_kv = int(self._field(f"{a}.attention.head_count_kv", self.n_head))
        self.head_dim = int(self._field(f"{a}.attention.key_length", self.dim // self.n_head))
        self.rot_dim = int(self._field(f"{a}.rope.dimension_count", self.head_dim))
        self.rope_base = float(self._field(f"{a}.rope.freq_base", 10000.0))
        self.eps = float(self._field(f"{a}.attention.layer_norm_rms_epsilon", 1e-5))
        self._arch_features()
        self.tied = "output.weight" not in self.t
        emb = self.t["token_embd.weight"]
        self.n_vocab = int(emb.shape[1])
        assert int(emb.shape[0]) == self.dim
        assert self.n_head % self.n_kv == 0

    def _arch_features(self):
        """What qwen3 and gemma3 add to the Llama pattern, from the metadata (see hidden())."""
        a = self.arch
        gemma3 = a == "gemma3"
        self.qk_norm = a in ("qwen3", "gemma3")
        self.post_norms = gemma3
        self.gelu = gemma3
        self.embd_scale = np.sqrt(self.dim) if gemma3 else None
        self.swa = int(self._field(f"{a}.attention.sliding_window", 0))
        # gemma3: every 6th layer (l % 6 == 5) is global with rope.freq_base; the others are
        # windowed with base 10000
        self.swa_pattern = int(self._field(f"{a}.attention.sliding_window_pattern", 6)) if gemma3 else 0
        self.rope_base_swa = 10000.0 if gemma3 else self.rope_base
        self.softcap = float(self._field(f"{a}.final_logit_softcapping", 0.0))
        self.attn_scale = 1.0 / np.sqrt(self.head_dim)
        if gemma3 and self.n_layer == 62:  # 27B: query_pre_attn_scalar = dim / heads
            self.attn_scale = 1.0 / np.sqrt(self.dim / self.n_head)
        # llama3 RoPE: theta_i divided by rope_freqs.weight[i]
        self.rope_freqs = self.weight("rope_freqs.weight").astype(np.float64) if "rope_freqs.weight" in self.t else None

    def layer_window(self, L):
        if not self.swa or (self.swa_pattern and L % self.swa_pattern == self.swa_pattern - 1):
            return 0
        return self.swa

    def layer_rope_base(self, L):
        return self.rope_base_swa if self.swa_pattern and self.layer_window(L) else self.rope_base

    def _field(self, key, default=None):
        fld = self.r.fields.get(key)
        if fld is None:
            if default is None:
                raise KeyError(f"{self.path}: missing metadata {key}")
            return default
        return fld.contents()

    # weights ------------------------------------------------------------

    def weight(self, name):
        """float64 array; matrices as (rows=out, cols=in)."""
        if self.cache is not None and name in self.cache:
            return self.cache[name]
        t = self.t[name]
        shape = [int(x) for x in t.shape]  # ggml order: ne0 (cols) first
        n = int(np.prod(shape))
        w = dequant_raw(np.asarray(t.data).view(np.uint8), t.tensor_type, n)
        assert w.size == n, (name, w.size, n)
        w = w.reshape(list(reversed(shape))).astype(self.dt, copy=False)
        if self.cache is not None:
            self.cache[name] = w
        return w

    def has(self, name):
        return name in self.t

    def embed_rows(self, ids):
        t = self.t["token_embd.weight"]
        rb = row_bytes(t.tensor_type, self.dim)
        raw = np.asarray(t.data).view(np.uint8).reshape(self.n_vocab, rb)
        return np.stack([dequant_raw(raw[i], t.tensor_type, self.dim) for i in ids]).astype(self.dt)

    # forward ------------------------------------------------------------

    def rmsnorm(self, x, name):
        w = self.weight(name)
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.dt.type(self.eps)) * w

    def rope(self, x, pos, base=None):
        """x: [T, H, head_dim]; rotates the first rot_dim dims."""
        rd = self.rot_dim
        half = rd // 2
        inv = (self.rope_base if base is None else base) ** (-2.0 * np.arange(half, dtype=np.float64) / rd)
        if self.rope_freqs is not None:
            inv = inv / self.rope_freqs
        ang = pos[:, None].astype(np.float64) * inv[None, :]  # [T, half]
        c = np.cos(ang)[:, None, :].astype(self.dt)
        s = np.sin(ang)[:, None, :].astype(self.dt)
        y = x.copy()
        if self.neox:
            a, b = x[..., :half], x[..., half:rd]
            y[..., :half] = a * c - b * s
            y[..., half:rd] = a * s + b * c
        else:
            a, b = x[..., 0:rd:2], x[..., 1:rd:2]
            y[..., 0:rd:2] = a * c - b * s
            y[..., 1:rd:2] = a * s + b * c
        return y

    def lin(self, x, name, bias=None):
        y = x @ self.weight(name).T
        if bias is not None and self.has(bias):
            y = y + self.weight(bias)
        return y

    def hidden(self, tokens):
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.min() < 0 or tokens.max() >= self.n_vocab:
            raise ValueError(f"token id out of range [0, {self.n_vocab})")
        T = len(tokens)
        H, K, D = self.n_head, self.n_kv, self.head_dim
        group = H // K
        pos = np.arange(T)
        mask = np.triu(np.full((T, T), -np.inf), k=1).astype(self.dt)
        x = self.embed_rows(tokens)
        if self.embd_scale is not None:
            x = x * self.dt.type(self.embd_scale)
        for L in range(self.n_layer):
            p = f"blk.{L}."
            h = self.rmsnorm(x, p + "attn_norm.weight")
            q = self.lin(h, p + "attn_q.weight", p + "attn_q.bias").reshape(T, H, D)
            k = self.lin(h, p + "attn_k.weight", p + "attn_k.bias").reshape(T, K, D)
            v = self.lin(h, p + "attn_v.weight", p + "attn_v.bias").reshape(T, K, D)
            if self.qk_norm:
                q = self.rmsnorm(q, p + "attn_q_norm.weight")
                k = self.rmsnorm(k, p + "attn_k_norm.weight")
            base = self.layer_rope_base(L)
            q = self.rope(q, pos, base)
            k = self.rope(k, pos, base)
            lmask = mask
            win = self.layer_window(L)
            if win:  # query i sees keys j with i - win < j <= i
                lmask = mask + np.tril(np.full((T, T), -np.inf), k=-win).astype(self.dt)
            out = np.empty((T, H, D), dtype=self.dt)
            for hh in range(H):
                kv = hh // group
                s = q[:, hh, :] @ k[:, kv, :].T * self.dt.type(self.attn_scale) + lmask
                s = s - s.max(axis=1, keepdims=True)
                e = np.exp(s)
                pr = e / e.sum(axis=1, keepdims=True)
                out[:, hh, :] = pr @ v[:, kv, :]
            o = self.lin(out.reshape(T, H * D), p + "attn_output.weight")
            if self.post_norms:
                o = self.rmsnorm(o, p + "post_attention_norm.weight")
            x = x + o
            h = self.rmsnorm(x, p + "ffn_norm.weight")
            g = self.lin(h, p + "ffn_gate.weight")
            u = self.lin(h, p + "ffn_up.weight")
            if self.gelu:  # GELU, tanh approximation
                a = 0.5 * g * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (g + 0.044715 * g ** 3))) * u
            else:
                a = g / (self.dt.type(1.0) + np.exp(-g)) * u
            f = self.lin(a, p + "ffn_down.weight")
            if self.post_norms:
                f = self.rmsnorm(f, p + "post_ffw_norm.weight")
            x = x + f
        return self.rmsnorm(x, "output_norm.weight")

    def logits(self, tokens):
        """float64 [len(tokens), n_vocab]: row i = logits after feeding tokens[0..i]."""
        h = self.hidden(tokens)
        lg = h @ self.weight("token_embd.weight" if self.tied else "output.weight").T
        if self.softcap:
            lg = self.softcap * np.tanh(lg / self.softcap)
        return lg

    def greedy(self, tokens, n):
        toks = list(tokens)
        for _ in range(n):
            toks.append(int(np.argmax(self.logits(toks)[-1])))
        return toks[len(tokens):]


# ------------------------------------------------------------------ comparison


def compare_arrays(ref, got, tie_tol=None):
    """ref: float64 [R, V] reference rows; got: [R, V] engine rows."""
    ref = np.asarray(ref, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    diff = np.abs(got - ref)
    row_max = diff.max(axis=1)
    scale = np.maximum(np.abs(ref).max(axis=1), 1e-30)
    am_ref = ref.argmax(axis=1)
    am_got = got.argmax(axis=1)
    mism = []
    for r in np.nonzero(am_ref != am_got)[0]:
        gap = ref[r, am_ref[r]] - ref[r, am_got[r]]  # >= 0: how far the engine's pick is behind
        mism.append({"row": int(r), "ref": int(am_ref[r]), "hone": int(am_got[r]), "ref_gap": float(gap)})
    tie_ok = tie_tol is not None and all(m["ref_gap"] <= 2 * tie_tol for m in mism)
    return {
        "max_abs_diff": float(row_max.max()) if len(row_max) else 0.0,
        "max_rel": float((row_max / scale).max()) if len(row_max) else 0.0,
        "argmax_agree": not mism,
        "argmax_agree_or_tie": (not mism) or tie_ok,
        "argmax_mismatches": mism,
        "rows": int(len(row_max)),
        "row_max_abs_diff": [float(v) for v in row_max],
        "logit_scale": float(scale.max()) if len(scale) else 0.0,
    }


def compare(model, hone_path, tie_tol=None):
    d = read_logits(hone_path)
    if d.n_vocab != model.n_vocab:
        raise ValueError(f"n_vocab mismatch: hone {d.n_vocab} vs model {model.n_vocab}")
    if d.n_rows == 0:
        raise ValueError(f"{hone_path}: no rows")
    last = int(d.row_pos.max())
    ref = model.logits(d.tokens[: last + 1])
    res = compare_arrays(ref[d.row_pos], d.logits, tie_tol)
    res["row_pos"] = [int(p) for p in d.row_pos]
    res["tokens"] = [int(t) for t in d.tokens]
    res["n_prompt"] = int(d.n_prompt)
    # greedy-consistency: where a row's next token was generated (not prompt),
    # it should be the reference argmax (up to near-ties).
    gen_bad = []
    for r, p in enumerate(d.row_pos):
        if d.n_prompt <= p + 1 < d.n_tokens:
            nxt = int(d.tokens[p + 1])
            best = int(ref[p].argmax())
            if nxt != best:
                gen_bad.append({"pos": int(p), "fed": nxt, "ref_argmax": best,
                                "ref_gap": float(ref[p, best] - ref[p, nxt])})
    res["continuation_not_ref_argmax"] = gen_bad
    return res


def parse_tokens(s):
    return [int(x) for x in s.replace(" ", "").split(",") if x]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--tokens", help="comma-separated token ids")
    ap.add_argument("--out", help="write logits [T, n_vocab] float64 to this .npy")
    ap.add_argument("--greedy", type=int, default=0, help="greedy-continue N tokens after --tokens")
    ap.add_argument("--compare", metavar="HONE_LOGITS_FILE")
    ap.add_argument("--tol", type=float, help="with --compare: max |dlogit| allowed (exit 1 above)")
    ap.add_argument("--verbose", action="store_true", help="with --compare: include per-row details")
    a = ap.parse_args(argv)
    m = ReferenceModel(a.model)
    if a.compare:
        res = compare(m, a.compare, a.tol)
        if not a.verbose:
            for k in ("row_max_abs_diff", "tokens", "row_pos"):
                res.pop(k, None)
        print(json.dumps(res, indent=1))
        if a.tol is not None:
            ok = res["max_abs_diff"] <= a.tol and res["argmax_agree_or_tie"]
            return 0 if ok else 1
        return 0
    if not a.tokens:
        ap.error("give --tokens or --compare")
    toks = parse_tokens(a.tokens)
    if a.greedy:
        print(",".join(map(str, m.greedy(toks, a.greedy))))
        return 0
    lg = m.logits(toks)
    if a.out:
        np.save(a.out, lg)
    print(json.dumps({"n_tokens": len(toks), "n_vocab": m.n_vocab,
                      "argmax": [int(i) for i in lg.argmax(axis=1)],
                      "max_abs_logit": float(np.abs(lg).max())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
