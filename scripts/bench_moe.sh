#!/usr/bin/env bash
# Mixture of experts in training (configs/models/llama-moe-small.json: 4 MoE layers of 8
# experts, top 2), from parbench's own JSON reports: 2 ranks, dp 2 with experts on every rank
# (ep 1) against expert parallelism (ep 2), dropless and with capacity factor 1.0. Per layout:
# median step time, MoE all-to-all time per step (dispatch, combine, the row-count alltoall;
# all exposed: the calls block), the bytes they move per step and their bandwidth, tokens per
# expert (imbalance = max/mean) and the assignments dropped. Runs alternate between the layouts
# (ROUNDS rounds) and each figure is the median over rounds, since run-to-run noise on these
# VMs is large.
# Usage: scripts/bench_moe.sh [build-dir]   (default: build/; ROUNDS=3 by default)
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
rounds=${ROUNDS:-3}
args=(train --model llama-moe-small --global-batch 8 --warmup 2 --steps 5)
layouts=("ep1-dropless:" "ep2-dropless:--ep 2" "ep1-capacity1:--moe-expert-capacity-factor 1.0"
         "ep2-capacity1:--ep 2 --moe-expert-capacity-factor 1.0")

echo "machine: $(machine_description)"
echo "command: mpirun -np 2 parbench ${args[*]} [--ep 2] [--moe-expert-capacity-factor 1.0]   ($rounds alternating rounds, medians)"
echo
for round in $(seq "$rounds"); do
  for layout in "${layouts[@]}"; do
    IFS=: read -r name flags <<< "$layout"
    # shellcheck disable=SC2086
    "${mpi[@]}" -np 2 "$parbench" "${args[@]}" $flags --json "$out/${name}_$round.json" > /dev/null
  done
done
python3 - "$out" "$rounds" "${layouts[@]}" <<'PY'
import json, statistics, sys
out, rounds, layouts = sys.argv[1], int(sys.argv[2]), [layout.split(":")[0] for layout in sys.argv[3:]]
print(f"{'layout':<15} {'step ms':>8} {'a2a ms/step':>11} {'dispatch ms':>11} {'combine ms':>10} {'MB/step':>8} "
      f"{'GB/s':>6} {'imbalance':>9} {'dropped/step':>12}")
for name in layouts:
    runs = [json.load(open(f"{out}/{name}_{k}.json"))["results"][0] for k in range(1, rounds + 1)]
    med = lambda f: statistics.median(f(r) for r in runs)
    layers = lambda r: r["moe"]["layers"]
    dispatch = med(lambda r: sum(l["dispatch_ms"] for l in layers(r)))
    combine = med(lambda r: sum(l["combine_ms"] for l in layers(r)))
    exposed = med(lambda r: sum(l["exposed_ms"] for l in layers(r)))
    moved = med(lambda r: sum(l["dispatch_bytes"] + l["combine_bytes"] for l in layers(r)))
    # ep 1 exchanges nothing: no bandwidth to print
    bandwidth = f"{moved / ((dispatch + combine) / 1e3) / 1e9:6.2f}" if dispatch + combine > 0 else f"{'-':>6}"
    imbalance = med(lambda r: max(l["imbalance"] or 1.0 for l in layers(r)))
    dropped = med(lambda r: sum(l["dropped"] for l in layers(r)))
    print(f"{name:<15} {med(lambda r: r['step_time_ms']['median']):8.2f} {exposed:11.3f} {dispatch:11.3f} "
          f"{combine:10.3f} {moved / 1e6:8.3f} {bandwidth} {imbalance:9.3f} {dropped:12.1f}")
PY
