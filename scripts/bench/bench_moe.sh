#!/usr/bin/env bash
# Mixture of experts in training (configs/models/llama-moe-small.json: 4 MoE layers of 8
# experts, top 2), from parbench's own JSON reports: 2 ranks, dp 2 with experts on every rank
# (ep 1) against expert parallelism (ep 2), dropless and with capacity factor 1.0, and ep 2 with
# --moe-a2a-overlap (each dispatch and combine as two alltoallv halves overlapping the other
# half's expert compute). Per layout: median step time, the MoE all-to-alls per step (dispatch,
# combine: a blocking call's duration, an overlapped half's time in flight), the exposed
# all-to-all (the time the host was blocked in them, the row-count alltoall included), the
# bytes they move per step and their bandwidth (blocking layouts only: an overlapped half's time
# in flight includes the compute it overlapped), tokens per expert (imbalance = max/mean) and
# the assignments dropped. Runs alternate between the layouts (alternating_order, ROUNDS rounds)
# and each figure is the median over rounds, since run-to-run noise on these VMs is large; the
# 1-minute load average is printed before and after, since a busy host distorts every figure.
# Then, over a pipeline (4 ranks: dp 2 x ep 2 x pp 2, 1F1B, 4 micro-batches), the exposed
# all-to-all blocking, with --moe-a2a-overlap (halves within a micro-batch) and with
# --moe-a2a-overlap-1f1b (each steady-state forward paired with the next backward, one's
# exchanges travelling while the other computes), in the same table. 4 ranks on fewer cores
# are oversubscribed (idle ranks busy-poll), and on one host the shared-memory transport copies
# with the same cores that compute, so no gain in step time is to be expected here: the figures
# show what is exposed, and the method; a machine with a network (or NVLink) shows the gain.
# Usage: scripts/bench/bench_moe.sh [build-dir]   (default: build/; ROUNDS=3, GLOBAL_BATCH=8 by default:
# a larger batch moves more rows per exchange, where the overlap has more to hide; PIPELINE=0
# skips the pipeline part, PIPELINE_BATCH=16 its global batch)
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
rounds=${ROUNDS:-3}
args=(train --model llama-moe-small --global-batch "${GLOBAL_BATCH:-8}" --warmup 2 --steps 5)
layouts=("ep1-dropless:" "ep2-dropless:--ep 2" "ep2-dropless-overlap:--ep 2 --moe-a2a-overlap"
         "ep1-capacity1:--moe-expert-capacity-factor 1.0" "ep2-capacity1:--ep 2 --moe-expert-capacity-factor 1.0"
         "ep2-capacity1-overlap:--ep 2 --moe-expert-capacity-factor 1.0 --moe-a2a-overlap")

echo "machine: $(machine_description)"

# Runs every layout of "${layouts[@]}" ROUNDS times in alternating order on $1 ranks, as
# $2_<layout>_<round>.json, then prints the medians.
bench() {
  local ranks=$1 prefix=$2
  echo "load average (1 min) before: $(cut -d' ' -f1 /proc/loadavg)"
  for round in $(seq "$rounds"); do
    for index in $(alternating_order "${#layouts[@]}" "$round"); do
      IFS=: read -r name flags <<< "${layouts[$index]}"
      # shellcheck disable=SC2086
      "${mpi[@]}" -np "$ranks" "$parbench" "${args[@]}" $flags --json "$out/${prefix}_${name}_$round.json" > /dev/null
    done
  done
  echo "load average (1 min) after: $(cut -d' ' -f1 /proc/loadavg)"
  python3 - "$out/$prefix" "$rounds" "${layouts[@]}" <<'PY'
import json, statistics, sys
out, rounds, layouts = sys.argv[1], int(sys.argv[2]), [layout.split(":")[0] for layout in sys.argv[3:]]
print(f"{'layout':<26} {'step ms':>8} {'dispatch ms':>11} {'combine ms':>10} {'exposed a2a ms':>14} {'MB/step':>8} "
      f"{'GB/s':>6} {'imbalance':>9} {'dropped/step':>12}")
for name in layouts:
    runs = [json.load(open(f"{out}_{name}_{k}.json"))["results"][0] for k in range(1, rounds + 1)]
    med = lambda f: statistics.median(f(r) for r in runs)
    layers = lambda r: r["moe"]["layers"]
    dispatch = med(lambda r: sum(l["dispatch_ms"] for l in layers(r)))
    combine = med(lambda r: sum(l["combine_ms"] for l in layers(r)))
    exposed = med(lambda r: sum(l["exposed_ms"] for l in layers(r)))
    moved = med(lambda r: sum(l["dispatch_bytes"] + l["combine_bytes"] for l in layers(r)))
    overlapped = runs[0]["moe"]["a2a_overlap"] or runs[0]["moe"].get("a2a_overlap_1f1b", False)
    # ep 1 exchanges nothing, and an overlapped exchange's time includes compute: no bandwidth to print
    bandwidth = (f"{moved / ((dispatch + combine) / 1e3) / 1e9:6.2f}" if dispatch + combine > 0 and not overlapped
                 else f"{'-':>6}")
    imbalance = med(lambda r: max(l["imbalance"] or 1.0 for l in layers(r)))
    dropped = med(lambda r: sum(l["dropped"] for l in layers(r)))
    print(f"{name:<26} {med(lambda r: r['step_time_ms']['median']):8.2f} {dispatch:11.3f} {combine:10.3f} "
          f"{exposed:14.3f} {moved / 1e6:8.3f} {bandwidth} {imbalance:9.3f} {dropped:12.1f}")
PY
}

echo "command: mpirun -np 2 parbench ${args[*]} [--ep 2] [--moe-expert-capacity-factor 1.0] [--moe-a2a-overlap]   ($rounds alternating rounds, medians)"
echo
bench 2 flat
if [[ ${PIPELINE:-1} != 0 ]]; then
  # Per MoE layer the figures are those of the pipeline stage holding it (max over its ranks);
  # the sums run over both stages' layers, the last stage's unpaired under -1f1b.
  args=(train --model llama-moe-small --global-batch "${PIPELINE_BATCH:-16}" --warmup 2 --steps 5 --ep 2 --pp 2
        --schedule 1f1b --microbatches 4)
  layouts=("ep2-pp2-blocking:" "ep2-pp2-overlap-halves:--moe-a2a-overlap"
           "ep2-pp2-overlap-1f1b:--moe-a2a-overlap-1f1b")
  echo
  echo "command: mpirun -np 4 parbench ${args[*]} [--moe-a2a-overlap | --moe-a2a-overlap-1f1b]   ($rounds alternating rounds, medians; 4 ranks oversubscribed on $(nproc) cores)"
  echo
  bench 4 pipeline
fi
