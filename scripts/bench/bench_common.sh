# Sourced by the bench_*.sh scripts (after `set -euo pipefail`) with their build-folder
# argument: sets root, build (default build/), parbench (exit 2 when it is not built), out (a
# temporary folder removed on exit) and mpi (mpirun for several ranks on this host, one
# OpenBLAS thread per rank, as the figures in the docs were taken).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
parbench=$build/parbench
[[ -x "$parbench" ]] || { echo "error: $parbench is not built; run scripts/setup.sh or pass the build folder" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1
mpi=(mpirun --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS=1)

# "<CPU model>, <N> cores": the head of every bench script's machine line.
machine_description() { echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"; }

# alternating_order COUNT ROUND: the indices 0..COUNT-1, reversed on even rounds, so that no
# configuration always runs first (or right after the same neighbour) on a machine that drifts.
alternating_order() {
  if (( $2 % 2 )); then seq 0 $(( $1 - 1 )); else seq $(( $1 - 1 )) -1 0; fi
}
