#!/usr/bin/env bash
# Sets up if needed, builds, and runs the whole CTest suite (units, multi-rank, end-to-end;
# GPU tests skip, saying why, when no GPU is visible). Extra arguments go to ctest, e.g.
#   scripts/test.sh -L unit
#   PARBENCH_MPI=mpich scripts/test.sh -L mpi     # the same suite over MPICH, built in build-mpich/
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
export OPENBLAS_NUM_THREADS=1
default_build=$root/build
[[ ${PARBENCH_MPI:-openmpi} == mpich ]] && default_build=$root/build-mpich
cd "${PARBENCH_BUILD_DIR:-$default_build}"
ctest --output-on-failure --timeout 600 "$@"
