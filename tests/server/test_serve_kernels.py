"""`hone serve --kernels DIR`: the server serves the approved kernels of a tree (the kernel
loader's checks), answers with them exactly as with the baselines (an exact-tier kernel), and a
kernel the loader refuses leaves the baseline serving with one log line; nothing else changes.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import serverlib as sl


def completion(s, prompt):
    st, j = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 12, "temperature": 0})
    return st, (j["choices"][0]["text"] if st == 200 else j)


def test_serves_the_tree(t):
    tree = tempfile.mkdtemp(prefix="hone-kernels-")
    try:
        os.makedirs(os.path.join(tree, "cpu"))
        # an exact-tier rmsnorm (tests/guard/good/: bitwise the baseline on these shapes) and a
        # kernel that does not compile
        shutil.copy(os.path.join(sl.SRC, "tests", "guard", "good", "rmsnorm_vec.c"),
                    os.path.join(tree, "cpu", "rmsnorm.c"))
        with open(os.path.join(tree, "cpu", "swiglu.c"), "w") as f:
            f.write("#include \"kernels/cpu/common.h\"\nvoid hone_cpu_swiglu(void) { this is not C; }\n")
        with sl.Server(sl.TINY) as base:
            st0, text0 = completion(base, "Once upon a time")
        with sl.Server(sl.TINY, "--kernels", tree) as s:
            log = s.log_text()
            t.check("rmsnorm.c installed for rmsnorm" in log, "the tree's rmsnorm is installed: %s" % log[-600:])
            t.check("swiglu.c refused, the baseline serves" in log, "a broken kernel is refused with one line")
            st1, text1 = completion(s, "Once upon a time")
            t.check(st0 == 200 and st1 == 200, "both answer (%s, %s)" % (st0, st1))
            t.check(text0 == text1, "the same text with the exact kernel: %r vs %r" % (text0, text1))
        # a tree that does not exist is a clear start-up error
        p = subprocess.run([sl.BIN, "serve", "-m", sl.TINY, "--port", "0", "--kernels", "/nonexistent/tree"],
                           capture_output=True, text=True, timeout=60)
        t.check(p.returncode != 0 and "/nonexistent/tree" in p.stderr, "missing tree: %r" % p.stderr[-300:])
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def main():
    if not os.path.isfile(sl.BIN) or not os.path.isfile(sl.TINY):
        print("skipped: needs %s and %s" % (sl.BIN, sl.TINY), file=sys.stderr)
        return sl.SKIP
    return sl.Checks().run([test_serves_the_tree])


if __name__ == "__main__":
    sys.exit(main())
