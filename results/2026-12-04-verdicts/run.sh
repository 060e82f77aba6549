#!/usr/bin/env bash
# The measurements behind docs/verdicts.md (issue 35), on this machine as it is: every JSON report
# lands beside this script. Usage: results/2026-12-04-verdicts/run.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
export OPENBLAS_NUM_THREADS=1
mpi=(mpirun --allow-run-as-root --oversubscribe)
cd "$here"
uptime > load-before.txt
# Verdicts: every collective, 1 KiB to 4 MiB, at 2, 3 and 4 ranks, against this host measured.
for np in 2 3 4; do
  "${mpi[@]}" -np "$np" "$build/parbench" all -b 1K -e 4M -f 16 -n 10 --placement out --expect-host \
    --json "verdicts-np$np.json" > "verdicts-np$np.txt" 2>&1 || true
done
# Interference: allreduce and alltoall at 2 ranks under each load.
for load in gemm:256 stream:64M collective:1M; do
  for collective in allreduce alltoall; do
    "${mpi[@]}" -np 2 "$build/parbench" "$collective" -b 64K -e 4M -f 8 -n 10 --placement out --background "$load" \
      --json "background-$collective-${load%%:*}.json" > "background-$collective-${load%%:*}.txt" 2>&1 || true
  done
done
# In-job figures: the sample Inspector logs beside a 2-rank allreduce sweep.
"${mpi[@]}" -np 2 "$build/parbench" allreduce -b 512K -e 4M -f 2 -n 10 --json bench-allreduce-np2.json > /dev/null 2>&1
"$build/parbench" compare "$here/../../tests/data/inspector" bench-allreduce-np2.json --markdown > inspector-compare.md 2>&1 || true
# MoE dispatch and combine at 2 and 4 ranks against skew.
for np in 2 4; do
  for skew in uniform zipf:1.2 hot:1; do
    "${mpi[@]}" -np "$np" "$build/parbench" moe-dispatch --tokens 512 --hidden 1024 --topk 4 --experts 16 --skew "$skew" \
      --json "moe-np$np-${skew/:/-}.json" > "moe-np$np-${skew/:/-}.txt" 2>&1 || true
  done
done
uptime > load-after.txt
