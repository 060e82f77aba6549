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
# Usage: scripts/bench_moe.sh [build-dir]   (default: build/; ROUNDS=3, GLOBAL_BATCH=8 by default:
# a larger batch moves more rows per exchange, where the overlap has more to hide)
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
rounds=${ROUNDS:-3}
args=(train --model llama-moe-small --global-batch "${GLOBAL_BATCH:-8}" --warmup 2 --steps 5)
layouts=("ep1-dropless:" "ep2-dropless:--ep 2" "ep2-dropless-overlap:--ep 2 --moe-a2a-overlap"
         "ep1-capacity1:--moe-expert-capacity-factor 1.0" "ep2-capacity1:--ep 2 --moe-expert-capacity-factor 1.0"
         "ep2-capacity1-overlap:--ep 2 --moe-expert-capacity-factor 1.0 --moe-a2a-overlap")

echo "machine: $(machine_description)"
echo "load average (1 min) before: $(cut -d' ' -f1 /proc/loadavg)"
echo "command: mpirun -np 2 parbench ${args[*]} [--ep 2] [--moe-expert-capacity-factor 1.0] [--moe-a2a-overlap]   ($rounds alternating rounds, medians)"
echo
for round in $(seq "$rounds"); do
  for index in $(alternating_order "${#layouts[@]}" "$round"); do
    IFS=: read -r name flags <<< "${layouts[$index]}"
    # shellcheck disable=SC2086
    "${mpi[@]}" -np 2 "$parbench" "${args[@]}" $flags --json "$out/${name}_$round.json" > /dev/null
  done
done
echo "load average (1 min) after: $(cut -d' ' -f1 /proc/loadavg)"
python3 - "$out" "$rounds" "${layouts[@]}" <<'PY'
import json, statistics, sys
out, rounds, layouts = sys.argv[1], int(sys.argv[2]), [layout.split(":")[0] for layout in sys.argv[3:]]
print(f"{'layout':<22} {'step ms':>8} {'dispatch ms':>11} {'combine ms':>10} {'exposed a2a ms':>14} {'MB/step':>8} "
      f"{'GB/s':>6} {'imbalance':>9} {'dropped/step':>12}")
for name in layouts:
    runs = [json.load(open(f"{out}/{name}_{k}.json"))["results"][0] for k in range(1, rounds + 1)]
    med = lambda f: statistics.median(f(r) for r in runs)
    layers = lambda r: r["moe"]["layers"]
    dispatch = med(lambda r: sum(l["dispatch_ms"] for l in layers(r)))
    combine = med(lambda r: sum(l["combine_ms"] for l in layers(r)))
    exposed = med(lambda r: sum(l["exposed_ms"] for l in layers(r)))
    moved = med(lambda r: sum(l["dispatch_bytes"] + l["combine_bytes"] for l in layers(r)))
    overlapped = runs[0]["moe"]["a2a_overlap"]
    # ep 1 exchanges nothing, and an overlapped half's time includes compute: no bandwidth to print
    bandwidth = (f"{moved / ((dispatch + combine) / 1e3) / 1e9:6.2f}" if dispatch + combine > 0 and not overlapped
                 else f"{'-':>6}")
    imbalance = med(lambda r: max(l["imbalance"] or 1.0 for l in layers(r)))
    dropped = med(lambda r: sum(l["dropped"] for l in layers(r)))
    print(f"{name:<22} {med(lambda r: r['step_time_ms']['median']):8.2f} {dispatch:11.3f} {combine:10.3f} "
          f"{exposed:14.3f} {moved / 1e6:8.3f} {bandwidth} {imbalance:9.3f} {dropped:12.1f}")
PY
