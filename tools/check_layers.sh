#!/usr/bin/env bash
# The layer check: fails (exit 1) on an #include that points up a layer. See check_layers.py.
#   tools/check_layers.sh [ROOT]
exec python3 "$(dirname "$0")/check_layers.py" "$@"
