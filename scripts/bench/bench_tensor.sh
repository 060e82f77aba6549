#!/usr/bin/env bash
# Tensor and sequence parallelism on this machine, from parbench's own JSON reports:
#   1. gpt-small at tp = 1, 2, 4 (one data-parallel rank, same global batch): median step
#      time and the share of it spent inside tensor-parallel collectives, bytes per step
#      (measured, and whether they equal the analytic volume);
#   2. the Megatron pairing against the all-gather style on mlp-deep at tp = 2: calls,
#      bytes and time of the tensor-parallel collectives, step time;
#   3. gpt-small at tp = 1, 2, 4 without and with --sp: activation memory per layer (measured
#      from the ledger, our fp32 formula, arXiv 2205.05198 table 2) and the activation peak.
# Runs alternate and figures are medians over rounds: run-to-run noise here is large.
# Usage: scripts/bench/bench_tensor.sh [build-dir] [rounds]   (default: build/; 3)
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
rounds=${2:-3}
cores=$(nproc)

run() {  # run NAME RANKS ARGS...: one report per round in $out/NAME_<round>.json
  local name=$1 ranks=$2
  shift 2
  "${mpi[@]}" -np "$ranks" "$parbench" train --warmup 2 --steps 5 "$@" --json "$out/${name}_$round.json" \
    > /dev/null 2> "$out/${name}_$round.err" || { cat "$out/${name}_$round.err" >&2; exit 1; }
}

# table TITLE NAME... : medians over rounds of each configuration's figures.
table() {
  python3 - "$out" "$rounds" "$@" <<'PY'
import json, statistics, sys
out, rounds, kind, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def results(name):
    return [json.load(open(f"{out}/{name}_{k}.json"))["results"][0] for k in range(1, rounds + 1)]
def median(values):
    return statistics.median(values)
def tp_ms(r):
    return sum(c["time_ms"] for c in r["comm"].get("tp", {}).values())
def tp_calls(r):
    return sum(c["calls"] for c in r["comm"].get("tp", {}).values())
def tp_mb(r):
    return sum(c["bytes"] for c in r["comm"].get("tp", {}).values()) / 1e6
if kind == "scaling":
    print(f"{'config':<22} {'ranks':>5} {'step ms':>9} {'tokens/s':>9} {'tp comm ms':>10} {'tp share':>8} {'tp MB/step':>10} {'= analytic':>10}")
    for name in names:
        rs = results(name)
        step = median([r["step_time_ms"]["median"] for r in rs])
        comm = median([tp_ms(r) for r in rs])
        r0 = rs[0]
        ranks = r0["layout"]["dp"] * r0["layout"]["tp"]
        print(f"{name:<22} {ranks:>5} {step:>9.1f} {median([r['tokens_per_s'] for r in rs]):>9.0f} {comm:>10.1f} "
              f"{100 * comm / step:>7.1f}% {tp_mb(r0):>10.3f} {str(r0['comm']['expected_matches'].get('tp', True)):>10}")
elif kind == "styles":
    print(f"{'config':<22} {'step ms':>9} {'tp calls':>8} {'tp MB/step':>10} {'tp comm ms':>10} {'activ. MiB':>10}  collectives")
    for name in names:
        rs = results(name)
        r0 = rs[0]
        ops = ", ".join(f"{op} {c['calls']:g}" for op, c in r0["comm"].get("tp", {}).items())
        print(f"{name:<22} {median([r['step_time_ms']['median'] for r in rs]):>9.1f} {tp_calls(r0):>8g} "
              f"{tp_mb(r0):>10.3f} {median([tp_ms(r) for r in rs]):>10.1f} "
              f"{r0['memory_bytes']['activations_peak'] / 2**20:>10.2f}  {ops}")
else:
    print(f"{'config':<22} {'per layer: measured':>20} {'fp32 formula':>13} {'paper 16-bit':>13} {'activ. peak':>12} {'step ms':>9}")
    for name in names:
        rs = results(name)
        a = rs[0]["activation_memory"]
        print(f"{name:<22} {a['measured_bytes_per_layer'] / 2**20:>16.3f} MiB {a['formula_bytes_per_layer'] / 2**20:>9.3f} MiB "
              f"{a['paper_bytes_per_layer'] / 2**20:>9.3f} MiB {rs[0]['memory_bytes']['activations_peak'] / 2**20:>8.2f} MiB "
              f"{median([r['step_time_ms']['median'] for r in rs]):>9.1f}")
PY
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $cores cores; $("$parbench" --version 2>/dev/null | head -1)"
echo "medians over $rounds alternating rounds; 2 warm-up + 5 timed steps each"
echo

for round in $(seq 1 "$rounds"); do
  run gpt_small_tp1 1 --model gpt-small --global-batch 4
  run gpt_small_tp2 2 --model gpt-small --global-batch 4 --tp 2
  run gpt_small_tp4 4 --model gpt-small --global-batch 4 --tp 4
  run mlp_deep_megatron 2 --model mlp-deep --global-batch 64 --tp 2
  run mlp_deep_allgather 2 --model mlp-deep --global-batch 64 --tp 2 --tp-style allgather
  run gpt_small_tp2_nosp 2 --model gpt-small --global-batch 4 --tp 2
  run gpt_small_tp2_sp 2 --model gpt-small --global-batch 4 --tp 2 --sp
  run gpt_small_tp4_sp 4 --model gpt-small --global-batch 4 --tp 4 --sp
done

echo "== 1. gpt-small (4 layers, h 256, 8 heads, s 128, V 2048), global batch 4, tensor parallelism only"
table scaling gpt_small_tp1 gpt_small_tp2 gpt_small_tp4
if (( cores < 4 )); then
  echo "note: tp 4 runs 4 ranks on $cores cores: oversubscribed, ranks share cores and busy-poll in MPI,"
  echo "      so its step time measures the scheduler as much as the split; quote tp <= $cores."
fi
echo
echo "== 2. mlp-deep (8 layers, h 1024), global batch 64, tp 2: Megatron pairing vs all-gather every layer"
table styles mlp_deep_megatron mlp_deep_allgather
echo "(bytes use nccl-tests' convention: an all-gather or reduce-scatter of a buffer counts the buffer, an"
echo " all-reduce counts it once; on a ring both move 2(t-1)/t of it per all-reduce-equivalent: see docs/tensor.md)"
echo
echo "== 3. gpt-small: activation memory per layer (one micro-batch of 4 x 128 tokens) without and with --sp"
table memory gpt_small_tp1 gpt_small_tp2_nosp gpt_small_tp2_sp gpt_small_tp4 gpt_small_tp4_sp
echo "(the attention scores a·s²·b/t are split by heads either way; SP divides the rest, the LayerNorm and"
echo " residual regions, by t as well; step times at tp 4 are oversubscribed)"
