#!/usr/bin/env bash
# Long-sequence figures of the training engine on this machine, from parbench's own JSON
# reports: activation recompute (--recompute none | selective | full) on llama-small, one rank:
# median step time, activation bytes one layer keeps (the ledger) beside the formula, the
# ledger's activation peak, MFU and HFU. Runs alternate between the modes (ROUNDS rounds) and
# each figure is the median over rounds, since run-to-run noise on these VMs is large.
# (Context parallelism, --cp: scripts/bench/bench_cp.sh.)
# Usage: scripts/bench/bench_context.sh [build-dir]   (default: build/; ROUNDS=3 by default)
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
rounds=${ROUNDS:-3}
args=(train --model llama-small --global-batch 4 --warmup 1 --steps 4)

echo "machine: $(machine_description)"
echo "command: mpirun -np 1 parbench ${args[*]} --recompute MODE   ($rounds alternating rounds, medians)"
echo
for round in $(seq "$rounds"); do
  for mode in none selective full; do
    "${mpi[@]}" -np 1 "$parbench" "${args[@]}" --recompute "$mode" --json "$out/${mode}_$round.json" > /dev/null
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print(f"{'recompute':<10} {'step ms':>9} {'layer act. MiB':>15} {'formula MiB':>12} {'act. peak MiB':>14} {'MFU':>6} {'HFU':>6}")
for mode in ["none", "selective", "full"]:
    runs = [json.load(open(f"{out}/{mode}_{k}.json"))["results"][0] for k in range(1, rounds + 1)]
    med = lambda f: statistics.median(f(r) for r in runs)
    mib = 1024 * 1024
    print(f"{mode:<10} {med(lambda r: r['step_time_ms']['median']):9.1f} "
          f"{med(lambda r: r['activation_memory']['measured_bytes_per_layer']) / mib:15.3f} "
          f"{med(lambda r: r['activation_memory']['formula_bytes_per_layer']) / mib:12.3f} "
          f"{med(lambda r: r['memory_bytes']['activations_peak']) / mib:14.2f} "
          f"{100 * med(lambda r: r['mfu']):5.1f}% {100 * med(lambda r: r['hfu']):5.1f}%")
PY
