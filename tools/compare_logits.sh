#!/usr/bin/env bash
# Bitwise logit parity between two hone binaries (a refactor's before and after): `hone logits`
# greedy, teacher-forced and a 45-token teacher-forced prompt, at 1 and 2 threads, on SmolLM2 and every tiny model under DIR.
# usage: tools/compare_logits.sh OLD_HONE NEW_HONE [TINY_MODELS_DIR]
set -euo pipefail
old=$1 new=$2 dir=${3:-build/testdata}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
models=("$(python3 "$(dirname "$0")/find_smollm2.py")")
for f in "$dir"/tiny-*.gguf; do [ -e "$f" ] && models+=("$f"); done
fail=0 n=0
# the long prompt: 45 tokens, so that prefill's matmuls run whole tiles and their leftovers
long=$(seq -s, 1 45)
for m in "${models[@]}"; do
  for t in 1 2; do
    for mode in greedy forced long; do
      if [ $mode = greedy ]; then args=(-p "The capital of France is" --steps 6)
      elif [ $mode = forced ]; then args=(--prompt-tokens 1,17,30,41,5,9,2 --tokens 3,4,5,6,7 --all-positions --steps 5)
      else args=(--prompt-tokens "$long" --tokens 3,4,5 --all-positions --steps 3); fi
      # a model the old build does not serve (a newer architecture) has nothing to compare
      if ! "$old" logits -m "$m" -t $t "${args[@]}" --out "$tmp/a" >/dev/null 2>&1; then
        echo "skipped: $(basename "$m") (the old build refuses it)"; continue
      fi
      "$new" logits -m "$m" -t $t "${args[@]}" --out "$tmp/b" >/dev/null 2>&1
      n=$((n + 1))
      if ! cmp -s "$tmp/a" "$tmp/b"; then echo "DIFFER: $(basename "$m") -t $t $mode"; fail=1; fi
    done
  done
done
echo "$n comparisons, $([ $fail = 0 ] && echo 'all bitwise identical' || echo 'some differ')"
exit $fail
