#!/usr/bin/env bash
# The one-shot accelerator check (hemx/bench/gpu.py): scripts/gpu-check.sh OUTDIR [--quick] [--budget SECONDS]
# Runs hemx from this checkout (PYTHONPATH, no install step) with $PYTHON (default python3) and whatever JAX that
# Python has (0.10.x or 0.11.x). Exit status: 0 only if every exactness check held (1 if one did not, 2 on bad
# arguments). Afterwards `scripts/gpu-check.sh --render OUTDIR` writes docs/results/gpu-<device>.md.
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    echo "usage: scripts/gpu-check.sh OUTDIR [--quick] [--budget SECONDS]" >&2
    echo "       scripts/gpu-check.sh --render OUTDIR_OR_JSON [--docs DIR]" >&2
    [ $# -ge 1 ] && exit 0
    exit 2
fi
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
if [ "$1" = "--render" ]; then  # the docs page goes into this checkout unless --docs says otherwise
    exec "${PYTHON:-python3}" -m hemx bench gpu --docs "$root/docs/results" "$@"
fi
exec "${PYTHON:-python3}" -m hemx bench gpu "$@"
