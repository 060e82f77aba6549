#!/usr/bin/env bash
# An MoE layer's token dispatch and combine as expert parallelism runs them, measured with
# `parbench alltoallv --direction dispatch|combine`: bandwidth against the expert-parallel degree
# (the ranks of the all-to-all) and the router's skew (--skew), medians over alternating rounds,
# as a table.
#
# One dispatch sends each of a rank's TOKENS tokens to its TOP_K experts: TOKENS x HIDDEN x TOP_K
# x 2 bytes (bf16 activations) per rank, cut into per-destination blocks by the skew: balanced
# sends, uneven receives, the busiest receiver `imbalance` (max / mean received bytes) times the
# mean, which is what `parbench plan --moe-imbalance` takes. The combine is the transposed exchange
# (each rank returns what it received: uneven sends, balanced receives, the busiest rank the
# busiest sender), the same bytes the other way. plan counts 4 such exchanges per MoE layer and
# step (dispatch and combine, forward and backward).
#
# Usage: scripts/bench/bench_moe_dispatch.sh [build-dir] [rounds] [ep list] [tokens] [hidden] [top_k] [skews]
#   defaults: build/, 5 rounds, "2 4" ranks, 1024 tokens, hidden 1024, top 2,
#             "uniform zipf:1.2 zipf:2 hot:1"
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
rounds=${2:-5}
read -r -a eps <<< "${3:-2 4}"
tokens=${4:-1024}
hidden=${5:-1024}
top_k=${6:-2}
read -r -a skews <<< "${7:-uniform zipf:1.2 zipf:2 hot:1}"
for value in "$rounds" "${eps[@]}" "$tokens" "$hidden" "$top_k"; do
  [[ $value =~ ^[1-9][0-9]*$ ]] || { echo "error: '$value': rounds, ep, tokens, hidden and top_k are positive integers" >&2; exit 2; }
done
bytes=$(( tokens * hidden * top_k * 2 ))

configs=()
for ep in "${eps[@]}"; do for skew in "${skews[@]}"; do for direction in dispatch combine; do
  configs+=("$ep/$skew/$direction")
done; done; done

run() {  # run INDEX ROUND: one report in $out/<index>_<round>.json
  local ep skew direction
  IFS=/ read -r ep skew direction <<< "${configs[$1]}"
  "${mpi[@]}" -np "$ep" "$parbench" alltoallv --skew "$skew" --direction "$direction" --size "$bytes" \
    --placement out --warmup 5 --iters 20 --quiet --json "$out/$1_$2.json" 2> "$out/$1_$2.err" ||
    { cat "$out/$1_$2.err" >&2; exit 1; }
}

echo "machine: $(machine_description)," \
     "$(uptime | sed 's/.*load average: /load /')"
echo "dispatch (and its transpose, the combine) of $tokens tokens x hidden $hidden x top $top_k x 2 B = $bytes B" \
     "per rank (float32 elements), out of place, 5 warm-up + 20 timed iterations per run; medians over $rounds" \
     "rounds alternating the order"
for round in $(seq 1 "$rounds"); do
  for index in $(alternating_order ${#configs[@]} "$round"); do run "$index" "$round"; done
done

python3 - "$out" "$rounds" "${configs[@]}" <<'PY'
import json, statistics, sys
out, rounds, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'ep':>3} {'skew':<9} {'direction':<9} {'busbw GB/s':>10} {'(min-max)':>13} {'time us':>9} {'algbw GB/s':>10} "
      f"{'busiest max/mean':>16} {'per-rank GB/s':>13} {'wrong':>5}")
for index, config in enumerate(configs):
    ep, skew, direction = config.split("/")
    points = [json.load(open(f"{out}/{index}_{k}.json"))["results"][0] for k in range(1, rounds + 1)]
    if any(p["skew"]["direction"] != direction for p in points):
        sys.exit(f"error: {config}: the reports ran another direction")
    busbw = [p["busbw_gbps"] for p in points]
    # The dispatch's busiest rank is its busiest receiver, the combine's its busiest sender.
    side = points[0]["imbalance"]["received" if direction == "dispatch" else "sent"]
    time_us = statistics.median(p["reported_time_us"] for p in points)
    # What the busiest rank moves per second to or from the other ranks: its block is the same for
    # every peer, its own included, so (n-1)/n of it crosses the wire.
    busiest = side["max_bytes"] * (int(ep) - 1) / int(ep) / time_us / 1e3
    print(f"{ep:>3} {skew:<9} {direction:<9} {statistics.median(busbw):>10.3f} {min(busbw):>6.2f}-{max(busbw):<6.2f} "
          f"{time_us:>9.1f} {statistics.median(p['algbw_gbps'] for p in points):>10.3f} "
          f"{side['max_over_mean']:>16.2f} {busiest:>13.3f} {sum(p['wrong'] for p in points):>5}")
PY
echo "(busbw = algbw x (n-1)/n on each rank's buffer of the balanced side, nccl-tests' alltoall convention; the"
echo " busiest rank sets the time, so a skewed exchange shows the same bytes at a lower busbw; busiest max/mean:"
echo " received bytes in the dispatch, sent in the combine; per-rank GB/s: the busiest rank's bytes to or from"
echo " the other ranks over the time)"
if (( $(printf '%s\n' "${eps[@]}" | sort -n | tail -1) > $(nproc) )); then
  echo "note: more ranks than the $(nproc) cores: oversubscribed, ranks share cores and busy-poll in MPI, so those"
  echo "      rows measure the scheduler as much as the transfer; compare rows of the same ep with each other."
fi
