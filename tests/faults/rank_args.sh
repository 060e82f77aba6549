#!/usr/bin/env bash
# Runs parbench with arguments chosen by rank, as a user's broken launch script might:
# PARBENCH_ARGS_<rank> (or PARBENCH_ARGS_DEFAULT) holds the rank's whole argument list.
# Usage (under mpirun): rank_args.sh PARBENCH_BINARY
set -euo pipefail
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}  # Open MPI, or MPICH's Hydra
variable=PARBENCH_ARGS_${rank}
arguments=${!variable:-${PARBENCH_ARGS_DEFAULT:-}}
# shellcheck disable=SC2086  # the list is split into words on purpose
exec "$1" $arguments
