#!/usr/bin/env bash
# Context parallelism on a long sequence (configs/models/llama-long.json, seq 1024), from
# parbench's own JSON reports: cp 1 on one rank against cp 2 on two ranks in both styles
# (ring, alltoall), balanced (zigzag) and not (none). Per layout: median step time, exposed cp
# communication (the attention's waits, max over ranks), each rank's attention compute and
# scores (the causal imbalance of --cp-balance none), and activation memory per rank (the
# ledger's peak, and what one layer keeps beside its formula). Runs alternate between the
# layouts (ROUNDS rounds) and each figure is the median over rounds, since run-to-run noise on
# these VMs is large.
# Usage: scripts/bench/bench_cp.sh [build-dir]   (default: build/; ROUNDS=3 by default)
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
rounds=${ROUNDS:-3}
args=(train --model llama-long --global-batch 2 --warmup 1 --steps 3)
layouts=("cp1:1:" "ring-zigzag:2:--cp 2 --cp-style ring --cp-balance zigzag"
         "ring-none:2:--cp 2 --cp-style ring --cp-balance none"
         "alltoall-zigzag:2:--cp 2 --cp-style alltoall --cp-balance zigzag"
         "alltoall-none:2:--cp 2 --cp-style alltoall --cp-balance none")

echo "machine: $(machine_description)"
echo "command: mpirun -np N parbench ${args[*]} [--cp 2 --cp-style S --cp-balance B]   ($rounds alternating rounds, medians)"
echo
for round in $(seq "$rounds"); do
  for layout in "${layouts[@]}"; do
    IFS=: read -r name ranks flags <<< "$layout"
    # shellcheck disable=SC2086
    "${mpi[@]}" -np "$ranks" "$parbench" "${args[@]}" $flags --json "$out/${name}_$round.json" > /dev/null
  done
done
python3 - "$out" "$rounds" "${layouts[@]}" <<'PY'
import json, statistics, sys
out, rounds, layouts = sys.argv[1], int(sys.argv[2]), [layout.split(":")[0] for layout in sys.argv[3:]]
mib = 1024 * 1024
print(f"{'layout':<16} {'step ms':>8} {'exposed cp ms':>13} {'attention ms per rank':>22} {'scores (M) per rank':>20} "
      f"{'act. peak MiB/rank':>18} {'layer MiB (formula)':>20}")
for name in layouts:
    runs = [json.load(open(f"{out}/{name}_{k}.json"))["results"][0] for k in range(1, rounds + 1)]
    med = lambda f: statistics.median(f(r) for r in runs)
    per_rank = lambda key, scale: " ".join(
        f"{statistics.median(r['context'][key][i] for r in runs) * scale:.1f}"
        for i in range(len(runs[0]['context'][key]))) if "context" in runs[0] else "-"
    exposed = med(lambda r: r["comm"]["exposed_ms"].get("cp", 0.0))
    layer = med(lambda r: r["activation_memory"]["measured_bytes_per_layer"]) / mib
    formula = med(lambda r: r["activation_memory"]["formula_bytes_per_layer"]) / mib
    peak = max(statistics.median(r["memory_bytes_by_rank"][i]["activations_peak"] for r in runs)
               for i in range(len(runs[0]["memory_bytes_by_rank"]))) / mib
    print(f"{name:<16} {med(lambda r: r['step_time_ms']['median']):8.1f} {exposed:13.1f} "
          f"{per_rank('attention_compute_ms_by_rank', 1):>22} {per_rank('attention_scores_by_rank', 1e-6):>20} "
          f"{peak:18.2f} {layer:9.3f} ({formula:.3f})")
PY
