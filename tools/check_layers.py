#!/usr/bin/env python3
"""The layer check (CONVENTIONS.md rule 11): every #include "..." in the layered folders must
point at its own layer or one below it. Layers, bottom to top:

    kernels < engine < profiler < candidates < guard < agent < app

engine/dtype.{h,c} count as kernels: the weight dtypes are the vocabulary the kernels are written
in (kernels/cpu/common.h includes engine/dtype.h) and include nothing themselves; CMake builds
dtype.c into hone_kernels for the same reason. engine/kv_layout.h (the paged KV cache's layout,
which kernels/cpu/common.h includes too) counts as kernels likewise.

An include is resolved as the compiler does for these targets: the including file's folder,
then the tree's root, then engine/ (both are include directories). Includes that resolve to no
file of the tree (a toolkit header, a generated one) are not layered and are skipped.

Usage: tools/check_layers.sh [ROOT]   (ROOT: the source tree, default: this script's tree)
Exit 0 when every include points down, 1 with one line per upward include, 2 on bad usage."""
import os
import re
import sys

LAYERS = ["kernels", "engine", "profiler", "candidates", "guard", "agent", "app"]
RANK = {name: i for i, name in enumerate(LAYERS)}
# files whose layer is not their folder's (see above)
FILE_LAYER = {"engine/dtype.h": "kernels", "engine/dtype.c": "kernels", "engine/kv_layout.h": "kernels"}
INCLUDE_DIRS = ["", "engine"]
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of(rel):
    """The layer of a tree-relative path, or None outside the layered folders."""
    rel = rel.replace(os.sep, "/")
    if rel in FILE_LAYER:
        return FILE_LAYER[rel]
    top = rel.split("/", 1)[0]
    return top if top in RANK else None


def resolve(root, src_rel, name):
    """The tree-relative path `#include "name"` in src_rel names, or None."""
    for base in [os.path.dirname(src_rel)] + INCLUDE_DIRS:
        cand = os.path.normpath(os.path.join(base, name))
        if not cand.startswith("..") and os.path.isfile(os.path.join(root, cand)):
            return cand.replace(os.sep, "/")
    return None


def check(root):
    """(violations, includes checked, files scanned); a violation is a printable line."""
    bad, n_inc, n_files = [], 0, 0
    for top in LAYERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith(SOURCE_EXT):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")
                src_layer = layer_of(rel)
                n_files += 1
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        target = resolve(root, rel, m.group(1))
                        dst_layer = layer_of(target) if target else None
                        if dst_layer is None:
                            continue
                        n_inc += 1
                        if RANK[dst_layer] > RANK[src_layer]:
                            bad.append('%s:%d: layer %s includes "%s" (%s) of layer %s, which is above it'
                                       % (rel, lineno, src_layer, m.group(1), target, dst_layer))
    return bad, n_inc, n_files


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if not os.path.isdir(os.path.join(root, "engine")):
        print("check_layers: %s is not a Hone source tree (no engine/)" % root, file=sys.stderr)
        return 2
    bad, n_inc, n_files = check(root)
    for line in bad:
        print(line)
    if bad:
        print("check_layers: %d upward include(s); layers, bottom to top: %s"
              % (len(bad), " < ".join(LAYERS)))
        return 1
    print("check_layers: ok, %d includes in %d files point down (%s)" % (n_inc, n_files, " < ".join(LAYERS)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
