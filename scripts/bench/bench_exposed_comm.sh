#!/usr/bin/env bash
# Exposed against total communication per parallel dimension for gpt-small, from parbench's
# own reports (comm.time_ms and comm.exposed_ms, docs/training.md), at four layouts:
#   tp 2, tp 2 + sp, pp 2 (1f1b, 4 micro-batches), dp 2 x tp 2 x pp 2 (8 ranks).
# The layouts run in turn, ROUNDS times (alternating, so drift on a shared machine hits all
# alike); each figure is the median over the rounds. On a 2-core machine the 8-rank layout
# is oversubscribed (4 ranks per core, busy-polling): its times measure the scheduler as
# much as the code, and the script says so.
# Usage: scripts/bench/bench_exposed_comm.sh [build-dir] [rounds]   (defaults: build/, 3)
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
rounds=${2:-3}
common=(train --model gpt-small --global-batch 4 --warmup 2 --steps 5)
layouts=(tp2 tp2_sp pp2 dp2_tp2_pp2)
declare -A ranks=([tp2]=2 [tp2_sp]=2 [pp2]=2 [dp2_tp2_pp2]=8)
declare -A flags=([tp2]="--tp 2" [tp2_sp]="--tp 2 --sp" [pp2]="--pp 2 --microbatches 4"
                  [dp2_tp2_pp2]="--dp 2 --tp 2 --pp 2 --microbatches 2")

echo "machine: $(machine_description); $(uptime | sed 's/.*load/load/')"
for round in $(seq 1 "$rounds"); do
  for layout in "${layouts[@]}"; do
    # shellcheck disable=SC2086
    "${mpi[@]}" -np "${ranks[$layout]}" "$parbench" "${common[@]}" ${flags[$layout]} \
      --json "$out/${layout}_$round.json" > /dev/null 2>&1
  done
done
python3 - "$out" "$rounds" "$(nproc)" "${layouts[@]}" <<'PY'
import json, statistics, sys
out, rounds, cores, layouts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
median = statistics.median
print(f"gpt-small, global batch 4, 2 warm-up + 5 timed steps; medians of {rounds} alternating runs; "
      "comm / exposed per step in ms (max over ranks per step, mean over steps)")
print(f"{'layout':<14} {'ranks':>5} {'step':>8}   {'dimension':<9} {'comm':>8} {'exposed':>8} {'share':>6}   "
      f"{'exposed total':>13}  expected traffic")
for layout in layouts:
    runs = [json.load(open(f"{out}/{layout}_{i}.json"))["results"][0] for i in range(1, rounds + 1)]
    first = runs[0]
    world = first["layout"]["dp"] * first["layout"]["tp"] * first["layout"]["pp"]
    step = median(r["step_time_ms"]["median"] for r in runs)
    total = median(r["exposed_comm_ms"] for r in runs)
    matches = all(all(r["comm"]["expected_matches_all_ranks"].values()) for r in runs)
    for i, dim in enumerate(first["comm"]["dimensions"]):
        comm = median(r["comm"]["time_ms"][dim] for r in runs)
        exposed = median(r["comm"]["exposed_ms"][dim] for r in runs)
        name = "tp+sp" if dim == "tp" and first["layout"]["sp"] else dim
        head = f"{layout:<14} {world:>5} {step:>8.1f}" if i == 0 else " " * 29
        tail = f"   {total:>13.1f}  {'equal on every rank' if matches else 'DIFFERENT'}" if i == 0 else ""
        print(f"{head}   {name:<9} {comm:>8.1f} {exposed:>8.1f} {exposed / comm if comm else 0:>6.0%}{tail}")
    if world > cores:
        print(f"{'':<14} ({world} ranks on {cores} cores: oversubscribed, times measure the scheduler too)")
PY
