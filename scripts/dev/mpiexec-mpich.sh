#!/usr/bin/env bash
# MPICH's mpiexec (Hydra) for the test suite, which writes Open MPI's command lines: Hydra runs
# as root and beyond the core count without being told, and refuses the flags that say so.
# MPICH 4.0.2's (Debian 12's) ch4 device-level reduce crashes (SIGSEGV inside MPI_Reduce) on
# an in-place reduce at a root other than 0 above 2 KiB; MPICH's generic reduce is correct, so
# the tests run with the device one off unless told otherwise (docs/clusters.md, MPICH).
export MPIR_CVAR_REDUCE_DEVICE_COLLECTIVE=${MPIR_CVAR_REDUCE_DEVICE_COLLECTIVE:-0}
args=()
for arg in "$@"; do
  case $arg in --allow-run-as-root | --oversubscribe) ;; *) args+=("$arg") ;; esac
done
exec mpiexec.mpich "${args[@]}"
