#!/usr/bin/env python3
"""A model's shape without its weights: the GGUF header cut before the tensor data, and a
random-weight model of exactly that shape made from it. Needs only numpy (no `gguf` package),
so it runs on the offline GPU machine, where SmolLM2's 96.6 MB GGUF cannot travel but its
~0.5 MB skeleton can (tools/gpu_bundle.sh).

  gguf_skeleton.py extract SRC.gguf SKEL.gz
      the header of SRC (every metadata key, the tokenizer included, and every tensor's name,
      shape and type), gzip'd
  gguf_skeleton.py make SKEL.gz DST.gguf [--dtype native|f32|f16] [--seed N]
      a GGUF v3 file with SRC's metadata and tensors, random weights: "native" keeps every
      tensor's type (SmolLM2 Q4_1: Q4_1 matrices, a Q8_0 embedding, f32 norms); f32 / f16 make
      every 2-D tensor that type and every 1-D one f32, as tools/convert_gguf.py does, and set
      general.file_type to match. Deterministic: the same --seed gives the same bytes.

Weights: matrices N(0, 0.5/sqrt(cols)), norm weights 1 + N(0, 0.05), biases N(0, 0.02), so the
logits stay finite through SmolLM2's 30 layers. Types written: F32, F16, Q8_0, Q4_0, Q4_1.
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

import numpy as np

MAGIC = b"GGUF"
# GGUF metadata value types -> struct format of a scalar (8: string, 9: array)
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
F32, F16, Q4_0, Q4_1, Q8_0 = 0, 1, 2, 3, 8
BLOCK = {F32: (1, 4), F16: (1, 2), Q4_0: (32, 18), Q4_1: (32, 20), Q8_0: (32, 34)}  # (elems, bytes)
FILE_TYPE = {F32: 0, F16: 1}  # general.file_type (llama.cpp's LlamaFileType) of an all-f32 / f16 file


class Reader:
    def __init__(self, buf):
        self.b, self.o = buf, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.take("Q")
        if self.o + n > len(self.b):
            raise struct.error("truncated string")
        s = bytes(self.b[self.o:self.o + n])
        self.o += n
        return s.decode("utf-8", errors="replace")

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("I"), self.take("Q")
            if et in SCALAR:  # skip numeric arrays in one step
                size = struct.calcsize("<" + SCALAR[et])
                self.o += size * n
                return None
            for _ in range(n):
                self.value(et)
            return None
        raise ValueError(f"unknown GGUF value type {t}")


def parse_header(buf):
    """-> (version, kvs: [(key, type, value, start, end)], tensors: [(name, dims, type)], end)."""
    r = Reader(buf)
    if bytes(buf[:4]) != MAGIC:
        raise ValueError("not a GGUF file")
    r.o = 4
    version = r.take("I")
    if version < 2:
        raise ValueError(f"GGUF version {version} is not supported")
    n_tensors, n_kv = r.take("Q"), r.take("Q")
    kvs = []
    for _ in range(n_kv):
        start = r.o
        key = r.string()
        t = r.take("I")
        v = r.value(t)
        kvs.append((key, t, v, start, r.o))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("I")
        dims = [r.take("Q") for _ in range(nd)]
        t = r.take("I")
        r.take("Q")  # offset: recomputed when writing
        tensors.append((name, dims, t))
    return version, kvs, tensors, r.o


def extract(src, dst):
    with open(src, "rb") as f:
        head = f.read(1 << 20)
        while True:
            try:
                _, _, _, end = parse_header(head)
                break
            except struct.error:  # header longer than what was read
                more = f.read(len(head))
                if not more:
                    raise
                head += more
    tmp = dst + ".tmp"
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as g:
        g.write(head[:end])
    os.replace(tmp, dst)


def f16_bytes(a):
    return np.asarray(a, dtype="<f2").tobytes()


def encode(x, t):
    """x: float32 [rows][cols] -> the tensor's bytes in GGUF type t."""
    if t == F32:
        return np.asarray(x, dtype="<f4").tobytes()
    if t == F16:
        return f16_bytes(x)
    b = x.reshape(-1, 32).astype(np.float32)
    if t == Q8_0:  # d = amax / 127, q = round(x / d)
        d = np.abs(b).max(axis=1) / 127.0
        inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0)
        q = np.clip(np.rint(b * inv[:, None]), -127, 127).astype(np.int8)
        out = np.empty((b.shape[0], 34), np.uint8)
        out[:, :2] = np.asarray(d, "<f2").view(np.uint8).reshape(-1, 2)
        out[:, 2:] = q.view(np.uint8)
        return out.tobytes()
    if t == Q4_1:  # d = (max - min) / 15, m = min, q = round((x - m) / d)
        lo, hi = b.min(axis=1), b.max(axis=1)
        d = (hi - lo) / 15.0
        inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0)
        q = np.clip(np.rint((b - lo[:, None]) * inv[:, None]), 0, 15).astype(np.uint8)
        out = np.empty((b.shape[0], 20), np.uint8)
        out[:, 0:2] = np.asarray(d, "<f2").view(np.uint8).reshape(-1, 2)
        out[:, 2:4] = np.asarray(lo, "<f2").view(np.uint8).reshape(-1, 2)
        out[:, 4:] = q[:, :16] | (q[:, 16:] << 4)  # element j in the low nibble, j + 16 high
        return out.tobytes()
    if t == Q4_0:  # d = max-magnitude / -8, q = round(x / d) + 8
        idx = np.abs(b).argmax(axis=1)
        mx = b[np.arange(b.shape[0]), idx]
        d = mx / -8.0
        inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0)
        q = np.clip(np.rint(b * inv[:, None]) + 8, 0, 15).astype(np.uint8)
        out = np.empty((b.shape[0], 18), np.uint8)
        out[:, 0:2] = np.asarray(d, "<f2").view(np.uint8).reshape(-1, 2)
        out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
        return out.tobytes()
    raise ValueError(f"cannot write GGUF tensor type {t}")


def weights(name, dims, rng):
    n = int(np.prod(dims))
    if len(dims) == 1:
        if "norm" in name:
            return (1.0 + 0.05 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)
        return (0.02 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)
    cols = dims[0]
    w = rng.standard_normal(n, dtype=np.float32)
    w *= np.float32(0.5 / np.sqrt(cols))
    return w.reshape(-1, cols)


def make(skel, dst, dtype="native", seed=1234):
    with gzip.open(skel, "rb") as g:
        head = g.read()
    version, kvs, tensors, _ = parse_header(head)
    align = 32
    for key, t, v, _, _ in kvs:
        if key == "general.alignment":
            align = int(v)
    want = {"f32": F32, "f16": F16}.get(dtype)
    if dtype != "native" and want is None:
        raise ValueError("--dtype must be native, f32 or f16")
    out_types = [t if want is None else (want if len(dims) >= 2 else F32) for _, dims, t in tensors]
    # metadata, verbatim but for general.file_type
    meta = bytearray()
    for key, t, v, start, end in kvs:
        if key == "general.file_type" and want is not None:
            kb = key.encode()
            meta += struct.pack("<Q", len(kb)) + kb + struct.pack("<II", 4, FILE_TYPE[want])
        else:
            meta += head[start:end]
    infos, offs, off = bytearray(), [], 0
    for (name, dims, _), t in zip(tensors, out_types):
        per, size = BLOCK[t]
        if dims[0] % per:
            raise ValueError(f"{name}: {dims[0]} columns is not a multiple of the {per}-element block")
        nb = int(np.prod(dims)) // per * size
        off = (off + align - 1) // align * align
        nm = name.encode()
        infos += struct.pack("<Q", len(nm)) + nm + struct.pack("<I", len(dims))
        infos += struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", t, off)
        offs.append((off, nb))
        off += nb
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<IQQ", version, len(tensors), len(kvs)))
        f.write(meta)
        f.write(infos)
        pad = (-f.tell()) % align
        f.write(b"\0" * pad)
        base = f.tell()
        for (name, dims, _), t, (o, nb) in zip(tensors, out_types, offs):
            f.write(b"\0" * (base + o - f.tell()))
            rng = np.random.default_rng([seed, zlib.crc32(name.encode())])  # per tensor: dtype-independent
            data = encode(weights(name, dims, rng), t)
            assert len(data) == nb, name
            f.write(data)
    os.replace(tmp, dst)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract")
    e.add_argument("src")
    e.add_argument("skel")
    m = sub.add_parser("make")
    m.add_argument("skel")
    m.add_argument("dst")
    m.add_argument("--dtype", default="native", choices=["native", "f32", "f16"])
    m.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args(argv)
    if a.cmd == "extract":
        extract(a.src, a.skel)
    else:
        make(a.skel, a.dst, a.dtype, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
