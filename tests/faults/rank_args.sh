#!/usr/bin/env bash
# Runs parbench with arguments chosen by rank, as a user's broken launch script might:
# PARBENCH_ARGS_<rank> (or PARBENCH_ARGS_DEFAULT) holds the rank's whole argument list, and
# PARBENCH_BINARY_<rank>, when set, another binary for that rank (a host with another build).
# Usage (under mpirun): rank_args.sh PARBENCH_BINARY
set -euo pipefail
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}  # Open MPI, or MPICH's Hydra
variable=PARBENCH_ARGS_${rank}
arguments=${!variable:-${PARBENCH_ARGS_DEFAULT:-}}
binary_variable=PARBENCH_BINARY_${rank}
binary=${!binary_variable:-$1}
# shellcheck disable=SC2086  # the list is split into words on purpose
exec "$binary" $arguments
