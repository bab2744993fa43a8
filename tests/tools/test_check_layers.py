#!/usr/bin/env python3
"""tools/check_layers.sh on a copy of this tree's sources: the copy as it is passes; an upward
include planted in it (engine -> agent, kernels -> engine, profiler -> guard) makes the check
fail with exit 1 and a line naming the file, the line and both layers; an include of the
layer itself or of one below stays allowed."""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("HONE_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CHECK = os.path.join(SRC, "tools", "check_layers.sh")
FOLDERS = ["kernels", "engine", "profiler", "candidates", "guard", "agent", "app"]
failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("CHECK failed: %s" % what, file=sys.stderr)


def run(root):
    p = subprocess.run([CHECK, root], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def copy_tree(dst):
    for d in FOLDERS:
        shutil.copytree(os.path.join(SRC, d), os.path.join(dst, d),
                        ignore=shutil.ignore_patterns("*.o", "build*"))


def plant(root, rel, line):
    """Inserts `line` as line 2 of root/rel; returns the original text."""
    path = os.path.join(root, rel)
    with open(path) as f:
        text = f.read()
    first, rest = text.split("\n", 1)
    with open(path, "w") as f:
        f.write(first + "\n" + line + "\n" + rest)
    return text


def restore(root, rel, text):
    with open(os.path.join(root, rel), "w") as f:
        f.write(text)


def main():
    with tempfile.TemporaryDirectory(prefix="hone-layers-") as root:
        copy_tree(root)
        rc, out = run(root)
        check(rc == 0, "the unmodified copy passes (rc %d):\n%s" % (rc, out))

        # an upward include, named with file:line and both layers
        orig = plant(root, "engine/pool.c", '#include "agent/tuner.h"')
        rc, out = run(root)
        check(rc == 1, "engine/pool.c -> agent/tuner.h fails (rc %d)" % rc)
        check("engine/pool.c:2:" in out, "names the file and line: %s" % out)
        check("layer engine" in out and "of layer agent" in out, "names both layers: %s" % out)
        check(out.count("engine/pool.c:") == 1, "one line for one include: %s" % out)
        restore(root, "engine/pool.c", orig)

        # by the engine's bare include path: "scheduler.h" from profiler resolves to engine/ (down)
        orig = plant(root, "profiler/membw.c", '#include "scheduler.h"')
        rc, out = run(root)
        check(rc == 0, "profiler -> engine (bare name) is allowed (rc %d): %s" % (rc, out))
        restore(root, "profiler/membw.c", orig)

        # the bottom layer may not reach into the engine, but may use the dtype vocabulary
        orig = plant(root, "kernels/cpu/add.c", '#include "engine/model.h"')
        rc, out = run(root)
        check(rc == 1 and "kernels/cpu/add.c:2:" in out and "of layer engine" in out,
              "kernels -> engine/model.h fails (rc %d): %s" % (rc, out))
        restore(root, "kernels/cpu/add.c", orig)
        orig = plant(root, "kernels/cpu/add.c", '#include "engine/dtype.h"')
        rc, out = run(root)
        check(rc == 0, "kernels -> engine/dtype.h is allowed (rc %d): %s" % (rc, out))
        restore(root, "kernels/cpu/add.c", orig)

        # a header points up too, and two planted includes give two lines
        plant(root, "profiler/profile.h", '#include "guard/guard.h"')
        plant(root, "candidates/store.c", '#include "app/cli.h"')
        rc, out = run(root)
        check(rc == 1 and "profiler/profile.h:2:" in out and "candidates/store.c:2:" in out,
              "both planted includes are named (rc %d): %s" % (rc, out))
        check("2 upward include(s)" in out, "the count: %s" % out)

    with tempfile.TemporaryDirectory(prefix="hone-layers-") as empty:
        rc, out = run(empty)
        check(rc == 2, "a folder that is not a source tree is a usage error (rc %d)" % rc)
    print("test_check_layers: %s" % ("FAILED" if failed else "ok"), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
