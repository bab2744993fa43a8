#!/usr/bin/env python3
"""Convert a GGUF model so that every 2-D weight is f32, f16, bf16, q8_0, q4_0 or q4_1.

  convert_gguf.py SRC DST --dtype f32|f16|bf16|q8_0|q4_0|q4_1 [--force]

Each tensor is dequantised exactly (in float64, from its raw block bytes:
F32, F16, BF16, Q8_0, Q4_0, Q4_1; other block formats such as the K-quants through
gguf.quants.dequantize, in float32 as ggml does) and then rounded once, to nearest-even, to
the target type; 1-D tensors (norms, biases) are written as f32. All metadata is
copied (general.file_type is updated to the new type). Tensor order is kept.
Used by the benchmarks (e.g. SmolLM2 Q4_1 -> f32/f16/bf16).
"""
import argparse
import os
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

TARGETS = {
    "f32": (QT.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (QT.F16, gguf.LlamaFileType.MOSTLY_F16),
    "bf16": (QT.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "q8_0": (QT.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "q4_0": (QT.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
    "q4_1": (QT.Q4_1, gguf.LlamaFileType.MOSTLY_Q4_1),
}


def _f16(b):
    return np.ascontiguousarray(b).view("<f2")[..., 0].astype(np.float64)


def dequant_f64(raw, qtype):
    raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    if qtype == QT.F32:
        return raw.view("<f4").astype(np.float64)
    if qtype == QT.F16:
        return raw.view("<f2").astype(np.float64)
    if qtype == QT.BF16:
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if qtype == QT.Q8_0:
        blk = raw.reshape(-1, 34)
        return (blk[:, 2:].view(np.int8).astype(np.float64) * _f16(blk[:, :2])[:, None]).reshape(-1)
    if qtype in (QT.Q4_0, QT.Q4_1):
        bs = 18 if qtype == QT.Q4_0 else 20
        blk = raw.reshape(-1, bs)
        d = _f16(blk[:, :2])[:, None]
        qs = blk[:, bs - 16:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float64)
        if qtype == QT.Q4_0:
            return ((q - 8.0) * d).reshape(-1)
        return (q * d + _f16(blk[:, 2:4])[:, None]).reshape(-1)
    # the other block formats (K-quants, Q5_0, ...): the gguf package's own dequantiser (its
    # float32 result, widened exactly)
    return gguf.quants.dequantize(raw, qtype).astype(np.float64).reshape(-1)


def f64_to_bf16_bits(x):
    """Round float64 directly to bf16 (nearest-even), avoiding f64->f32->bf16 double rounding."""
    x = np.asarray(x, dtype=np.float64)
    b = x.view(np.uint64)
    drop = np.uint64(45)  # 52 - 7 mantissa bits
    half = np.uint64((1 << 44) - 1)
    rounded = (b + half + ((b >> drop) & np.uint64(1))) & ~np.uint64((1 << 45) - 1)
    r32 = rounded.view(np.float64).astype(np.float32)  # exact: rounded fits bf16
    # outside f32's normal range (tiny/huge/nan) fall back to rounding via f32
    tiny = (np.abs(x) < 2.0 ** -126) | ~np.isfinite(x) | (np.abs(x) >= 2.0 ** 128)
    if tiny.any():
        fb = gguf.quants.quantize(x[tiny].astype(np.float32), QT.BF16).view(np.uint16)
        out = (r32.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        out[tiny] = fb
        return out
    return (r32.view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def copy_metadata(reader, writer, file_type):
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key == "general.file_type":
            writer.add_uint32(key, int(file_type))
            continue
        vtype = field.types[0]
        val = field.contents()
        if vtype == VT.ARRAY:
            sub = field.types[-1] if len(field.types) > 1 else None
            if sub == VT.ARRAY:
                raise NotImplementedError(f"nested array metadata {key}")
            writer.add_key_value(key, list(val), vtype, sub_type=sub)
        else:
            writer.add_key_value(key, val, vtype)
    if "general.file_type" not in reader.fields:
        writer.add_uint32("general.file_type", int(file_type))


def convert(src, dst, dtype):
    qt, ftype = TARGETS[dtype]
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    tmp = dst + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    copy_metadata(r, w, ftype)
    for t in r.tensors:
        shape = [int(x) for x in t.shape]  # ggml order (ne0 first)
        x = dequant_f64(np.asarray(t.data), t.tensor_type)
        assert x.size == int(np.prod(shape)), t.name
        x = x.reshape(list(reversed(shape)))
        if x.ndim < 2 or qt == QT.F32:
            w.add_tensor(t.name, x.astype(np.float32))
        elif qt in (QT.Q8_0, QT.Q4_0, QT.Q4_1):
            if x.shape[-1] % 32:
                w.add_tensor(t.name, x.astype(np.float32))
            else:
                w.add_tensor(t.name, gguf.quants.quantize(x.astype(np.float32), qt), raw_dtype=qt)
        elif qt == QT.F16:
            w.add_tensor(t.name, x.astype(np.float16))  # numpy rounds double->half directly
        else:
            w.add_tensor(t.name, f64_to_bf16_bits(x).view(np.uint8).reshape(*x.shape[:-1], -1),
                         raw_dtype=QT.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, dst)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--dtype", required=True, choices=list(TARGETS))
    ap.add_argument("--force", action="store_true", help="overwrite DST if it exists")
    a = ap.parse_args(argv)
    if os.path.exists(a.dst) and not a.force and os.path.getmtime(a.dst) >= os.path.getmtime(a.src):
        print(f"convert_gguf: {a.dst} exists and is newer than {a.src}; use --force to rebuild")
        return 0
    convert(a.src, a.dst, a.dtype)
    print(f"convert_gguf: wrote {a.dst} ({a.dtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
