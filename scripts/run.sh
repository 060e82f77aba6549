#!/usr/bin/env bash
# Sets up if needed, then runs parbench under mpirun with a rank count that fits the
# machine: one rank per GPU when GPUs are visible, else one per core.
#   scripts/run.sh allreduce --size 100M
#   PARBENCH_NP=4 scripts/run.sh all -b 8 -e 64M --check
# With no arguments it runs `allreduce --size 100M`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"

if [[ -n ${PARBENCH_NP:-} ]]; then
  ranks=$PARBENCH_NP
elif command -v nvidia-smi >/dev/null && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') && ((gpus > 0)); then
  ranks=$gpus
else
  ranks=$(nproc)
fi
options=(-np "$ranks" -x OPENBLAS_NUM_THREADS=1)
[[ $(id -u) -eq 0 ]] && options+=(--allow-run-as-root)
((ranks > $(nproc))) && options+=(--oversubscribe)
(($#)) || set -- allreduce --size 100M
exec mpirun "${options[@]}" "$root/build/parbench" "$@"
