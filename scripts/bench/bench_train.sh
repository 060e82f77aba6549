#!/usr/bin/env bash
# Figures of the training engine on this machine, from parbench's own JSON reports:
#   1. the single-rank gpt-small step's achieved FLOP/s as a fraction of the measured
#      single-core sgemm peak (the report's MFU on a CPU);
#   2. data-parallel scaling at 2 ranks, WEAK scaling: the global batch doubles with the
#      ranks (each rank keeps the 1-rank batch), efficiency = tokens/s(2) / (2 x tokens/s(1));
#   3. measured per-rank memory for ZeRO 0/1/2/3 at 4 ranks beside ZeRO's theoretical
#      16 B/param ledger (small buckets, so ZeRO-2's gradient slots stay small).
# Usage: scripts/bench/bench_train.sh [build-dir]   (default: build/)
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results'][0]; print(eval(sys.argv[2], {}, {'r': r}))" "$@"; }

echo "machine: $(machine_description)"
echo

echo "== 1. gpt-small, 1 rank: achieved FLOP/s vs the measured sgemm peak"
"${mpi[@]}" -np 1 "$parbench" train --model gpt-small --global-batch 4 --warmup 2 --steps 6 \
  --json "$out/one.json" > /dev/null
field "$out/one.json" "'median step %.1f ms, %.2f GFLOP/s achieved of %.2f GFLOP/s sgemm peak = %.1f%% MFU' % (r['step_time_ms']['median'], 1e3*r['achieved_tflops_per_rank'], 1e3*r['peak_tflops_per_rank'], 100*r['mfu'])"
echo

echo "== 2. data parallelism, weak scaling: 4 sequences per rank (global batch 4 at 1 rank, 8 at 2)"
# Alternate the runs and take medians: run-to-run noise on these VMs is large.
for round in 1 2 3; do
  "${mpi[@]}" -np 1 "$parbench" train --model gpt-small --global-batch 4 --warmup 2 --steps 6 \
    --json "$out/dp1_$round.json" > /dev/null
  "${mpi[@]}" -np 2 "$parbench" train --model gpt-small --global-batch 8 --warmup 2 --steps 6 \
    --json "$out/dp2_$round.json" > /dev/null
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
tps = lambda name: json.load(open(f"{out}/{name}.json"))["results"][0]["tokens_per_s"]
one = statistics.median(tps(f"dp1_{i}") for i in (1, 2, 3))
two = statistics.median(tps(f"dp2_{i}") for i in (1, 2, 3))
print(f"tokens/s: 1 rank {one:.0f}, 2 ranks {two:.0f} (medians of 3 alternating runs); "
      f"weak-scaling efficiency {two / (2 * one):.1%}")
PY
echo

echo "== 3. memory per rank, gpt-small, 4 ranks (oversubscribed: memory only, not time)"
printf "%-7s %12s %12s %12s %12s %12s   %14s\n" scheme params grads optimizer activations total "theory total"
for zero in 0 1 2 3; do
  "${mpi[@]}" -np 4 "$parbench" train --model gpt-small --global-batch 4 --warmup 1 --steps 1 --zero "$zero" \
    --bucket-mb 1 --json "$out/zero$zero.json" > /dev/null 2>&1
  field "$out/zero$zero.json" "'%-7s %12d %12d %12d %12d %12d   %14d' % (r['layout']['scheme'], r['memory_bytes']['params'], r['memory_bytes']['grads'], r['memory_bytes']['optimizer'], r['memory_bytes']['activations_peak'], r['memory_bytes']['total_peak'], r['memory_theoretical_bytes']['total'])"
done
field "$out/zero0.json" "'(bytes; theory = ZeRO model states, 16 B/param of %d parameters, without activations or buffers)' % r['model']['parameters']"
