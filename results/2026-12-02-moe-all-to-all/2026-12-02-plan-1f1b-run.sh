#!/usr/bin/env bash
# How 2026-12-02-plan-1f1b.md's figures were taken: collective and compute calibration for plan, then
# alternating 4-rank train runs blocking / --moe-a2a-overlap-1f1b, with the load before each.
#   2026-12-02-plan-1f1b-run.sh PARBENCH OUT_DIR   (env: ROUNDS_LIST="1 2 3", SKIP_CAL=1 to keep OUT_DIR's calibration)
set -u
pb=$(realpath "$1")
mkdir -p "$2" && cd "$2"
export OPENBLAS_NUM_THREADS=1
mpi=(mpirun --allow-run-as-root --oversubscribe)
echo "start $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> log.txt
[[ -n ${SKIP_CAL:-} ]] || "${mpi[@]}" -np 4 "$pb" alltoallv -b 1K -e 8M -f 2 -q --json coll-alltoallv-np4.json < /dev/null >> log.txt 2>&1
[[ -n ${SKIP_CAL:-} ]] || "${mpi[@]}" -np 4 "$pb" alltoall -b 8 -e 64K -f 4 -q --json coll-alltoall-np4.json < /dev/null >> log.txt 2>&1
[[ -n ${SKIP_CAL:-} ]] || "$pb" train --model llama-moe-small --global-batch 8 --precision fp32 --warmup 2 --steps 5 --quiet \
  --json compute-train.json < /dev/null >> log.txt 2>&1
args=(train --model llama-moe-small --global-batch 16 --warmup 2 --steps 5 --dp 2 --ep 2 --pp 2 --schedule 1f1b --microbatches 4)
for round in ${ROUNDS_LIST:-1 2 3}; do
  if (( round % 2 )); then order="blocking paired"; else order="paired blocking"; fi
  for name in $order; do
    extra=""; [[ $name == paired ]] && extra="--moe-a2a-overlap-1f1b"
    echo "round $round $name $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> log.txt
    "${mpi[@]}" -np 4 "$pb" "${args[@]}" $extra --json "train-$name-$round.json" < /dev/null > /dev/null 2>> log.txt
  done
done
echo "done $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> log.txt
