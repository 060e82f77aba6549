#!/usr/bin/env bash
# parbench's training step against PyTorch's on the CPU (issue 19's yardstick; optional, never
# part of CI): installs PyTorch from PyPI into a virtual environment of its own (.venv-torch,
# git-ignored; PARBENCH_TORCH_VENV to put it elsewhere), then runs scripts/bench/bench_vs_torch.py:
# the same model from configs/models, the same initial weights and data, parameter counts and
# losses checked, then parbench and PyTorch alternately, one BLAS/intra-op thread per rank.
#   scripts/bench/bench_vs_torch.sh [--pairs N] [--steps N] [--json FILE] [--profile] [comparison...]
#   comparisons: gpt-small llama-small mlp-deep gpt-small-dp2 gpt-small-zero3 (default: all)
# Build parbench first (scripts/setup.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then  # before any install: the usage alone
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    echo "Options of scripts/bench/bench_vs_torch.py: --pairs --steps --warmup --cpu-steps --tolerance --baseline --profile --json"
    exit 0
  fi
done
venv=${PARBENCH_TORCH_VENV:-$root/.venv-torch}
# The arguments first (the parbench binaries they name too), with the system's Python, since the
# check needs no PyTorch: a typo is one line and exit 2, not a PyTorch download and then the line.
python3 "$root/scripts/bench/bench_vs_torch.py" --check-arguments "$@" || exit 2
if ! "$venv/bin/python" -c "import torch, numpy" 2>/dev/null; then
  echo "bench_vs_torch: installing PyTorch and numpy into $venv (once)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch numpy
fi
exec "$venv/bin/python" "$root/scripts/bench/bench_vs_torch.py" --python "$venv/bin/python" "$@"
