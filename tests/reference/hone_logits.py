"""Reader (and writer, for tests) of Hone's logits dump.

File format, little-endian:
    char    magic[8] = "HONELGT1"
    uint32  n_vocab
    uint32  n_tokens      whole fed sequence: prompt then continuation
    uint32  n_prompt
    uint32  n_rows
    int32   tokens[n_tokens]
    int32   row_pos[n_rows]   row r holds the logits after feeding tokens[0..row_pos[r]]
    float32 logits[n_rows][n_vocab]
"""
import struct
import sys
from dataclasses import dataclass

import numpy as np

MAGIC = b"HONELGT1"
_HDR = struct.Struct("<8sIIII")


@dataclass
class HoneLogits:
    n_vocab: int
    n_prompt: int
    tokens: np.ndarray   # int32 [n_tokens]
    row_pos: np.ndarray  # int32 [n_rows]
    logits: np.ndarray   # float32 [n_rows, n_vocab]

    @property
    def n_tokens(self):
        return len(self.tokens)

    @property
    def n_rows(self):
        return len(self.row_pos)


def read_logits(path):
    with open(path, "rb") as fh:
        buf = fh.read()
    if len(buf) < _HDR.size:
        raise ValueError(f"{path}: too short for a HONELGT1 header ({len(buf)} bytes)")
    magic, n_vocab, n_tokens, n_prompt, n_rows = _HDR.unpack_from(buf, 0)
    if magic != MAGIC:
        raise ValueError(f"{path}: bad magic {magic!r}, expected {MAGIC!r}")
    want = _HDR.size + 4 * n_tokens + 4 * n_rows + 4 * n_rows * n_vocab
    if len(buf) != want:
        raise ValueError(f"{path}: size {len(buf)} != expected {want} "
                         f"(n_vocab={n_vocab} n_tokens={n_tokens} n_rows={n_rows})")
    if n_prompt > n_tokens:
        raise ValueError(f"{path}: n_prompt {n_prompt} > n_tokens {n_tokens}")
    off = _HDR.size
    tokens = np.frombuffer(buf, "<i4", n_tokens, off).astype(np.int32)
    off += 4 * n_tokens
    row_pos = np.frombuffer(buf, "<i4", n_rows, off).astype(np.int32)
    off += 4 * n_rows
    logits = np.frombuffer(buf, "<f4", n_rows * n_vocab, off).astype(np.float32).reshape(n_rows, n_vocab)
    if n_rows and (row_pos.min() < 0 or row_pos.max() >= n_tokens):
        raise ValueError(f"{path}: row_pos out of range [0, {n_tokens})")
    return HoneLogits(n_vocab, n_prompt, tokens, row_pos, logits)


def write_logits(path, tokens, n_prompt, row_pos, logits):
    logits = np.asarray(logits, dtype="<f4")
    n_rows, n_vocab = logits.shape
    with open(path, "wb") as fh:
        fh.write(_HDR.pack(MAGIC, n_vocab, len(tokens), n_prompt, n_rows))
        fh.write(np.asarray(tokens, dtype="<i4").tobytes())
        fh.write(np.asarray(row_pos, dtype="<i4").tobytes())
        fh.write(logits.tobytes())


if __name__ == "__main__":
    for p in sys.argv[1:]:
        d = read_logits(p)
        print(f"{p}: n_vocab={d.n_vocab} n_tokens={d.n_tokens} n_prompt={d.n_prompt} n_rows={d.n_rows}")
        print("  tokens :", ",".join(map(str, d.tokens)))
        print("  row_pos:", ",".join(map(str, d.row_pos)))
        print("  argmax :", ",".join(map(str, d.logits.argmax(axis=1))))
