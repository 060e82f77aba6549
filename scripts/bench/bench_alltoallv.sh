#!/usr/bin/env bash
# alltoallv's bus bandwidth against the skew of its blocks (--skew), beside the even
# alltoall as a control, from parbench's own JSON reports: per skew, the median over rounds
# of each run's busbw, the time, and how unevenly the traffic fell (max / mean bytes a rank
# receives; every rank sends its whole buffer, so sent max/mean is 1). Each round runs every
# configuration once, in an order that alternates between rounds, so drift on a shared
# machine hits them alike.
# Usage: scripts/bench/bench_alltoallv.sh [build-dir] [rounds] [ranks] [size]   (default: build/; 5; 4; 4M)
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
rounds=${2:-5}
ranks=${3:-4}
size=${4:-4M}
skews=(uniform zipf:0.5 zipf:1 zipf:2 hot:2 hot:1)
configs=(alltoall "${skews[@]}")

run() {  # run CONFIG ROUND: one report in $out/<index>_<round>.json
  local config=$1 index=$2 round=$3 collective=(alltoallv --skew "$1")
  [[ $config == alltoall ]] && collective=(alltoall)
  "${mpi[@]}" -np "$ranks" "$parbench" "${collective[@]}" --size "$size" --placement out --warmup 5 --iters 20 \
    --quiet --json "$out/${index}_$round.json" 2> "$out/${index}_$round.err" ||
    { cat "$out/${index}_$round.err" >&2; exit 1; }
}

echo "machine: $(machine_description)," \
     "$(uptime | sed 's/.*load average: /load /')"
echo "$ranks ranks, $size per rank (each rank's send buffer), float32, out of place, 5 warm-up + 20 timed" \
     "iterations per run; medians over $rounds alternating rounds"
for round in $(seq 1 "$rounds"); do
  for index in $(alternating_order ${#configs[@]} "$round"); do run "${configs[$index]}" "$index" "$round"; done
done

python3 - "$out" "$rounds" "${configs[@]}" <<'PY'
import json, statistics, sys
out, rounds, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'collective':<10} {'skew':<9} {'busbw GB/s':>10} {'(min-max)':>13} {'time us':>9} {'algbw GB/s':>10} "
      f"{'recv max/mean':>13} {'sent max/mean':>13} {'wrong':>5}")
for index, config in enumerate(configs):
    points = [json.load(open(f"{out}/{index}_{k}.json"))["results"][0] for k in range(1, rounds + 1)]
    busbw = [p["busbw_gbps"] for p in points]
    imbalance = points[0].get("imbalance")
    received = f"{imbalance['received']['max_over_mean']:.2f}" if imbalance else "1.00"
    sent = f"{imbalance['sent']['max_over_mean']:.2f}" if imbalance else "1.00"
    name, skew = ("alltoall", "-") if config == "alltoall" else ("alltoallv", config)
    print(f"{name:<10} {skew:<9} {statistics.median(busbw):>10.3f} {min(busbw):>6.2f}-{max(busbw):<6.2f} "
          f"{statistics.median(p['reported_time_us'] for p in points):>9.1f} "
          f"{statistics.median(p['algbw_gbps'] for p in points):>10.3f} {received:>13} {sent:>13} "
          f"{sum(p['wrong'] for p in points):>5}")
PY
echo "(busbw = algbw x (n-1)/n on each rank's send buffer, nccl-tests' alltoall convention; the slowest rank,"
echo " the most popular receiver, sets the time, so a skewed run shows the same bytes at a lower busbw)"
if (( ranks > $(nproc) )); then
  echo "note: $ranks ranks on $(nproc) cores: oversubscribed, ranks share cores and busy-poll in MPI, so the"
  echo "      times measure the scheduler as much as the transfer; compare the rows with each other only."
fi
