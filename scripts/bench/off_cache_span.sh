#!/usr/bin/env bash
# How far a collective's buffers must rotate before its time stops rising: the 2-rank reduce-scatter,
# all-gather and all-reduce at one size, hot (one pair of buffers, as nccl-tests and OSU time them)
# and with --off-cache at each span, in ROUNDS alternating rounds, each figure the median over the
# rounds of each run's median. The span past which the time stays flat is the cache the step's
# compute evicts; validate_plan.sh sweeps off cache at twice it.
#
#   scripts/bench/off_cache_span.sh OUT_DIR      (env: BUILD=build ROUNDS=3 SIZE=1M SPANS="4M 8M 16M 32M 64M 128M 256M")
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$here/build}
out=${1:?usage: off_cache_span.sh OUT_DIR}
rounds=${ROUNDS:-3}
size=${SIZE:-1M}
read -r -a spans <<< "${SPANS:-4M 8M 16M 32M 64M 128M 256M}"
[[ -x $build/parbench ]] || { echo "error: $build/parbench is missing; build first (cmake --build $build)" >&2; exit 1; }
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
collectives=(reducescatter allgather allreduce)
for round in $(seq 1 "$rounds"); do
  echo "round $round $(date -u +%H:%M:%SZ) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out/load.txt"
  for span in hot "${spans[@]}"; do
    for collective in "${collectives[@]}"; do
      flags=()
      [[ $span != hot ]] && flags=(--off-cache "$span")
      mpirun --allow-run-as-root --oversubscribe -np 2 "$build/parbench" "$collective" --size "$size" \
        --placement out "${flags[@]}" -q --json "$out/$collective-$span-r$round.json" < /dev/null
    done
  done
done
python3 - "$out" "$rounds" "${collectives[*]}" hot "${spans[@]}" <<'PY' | tee "$out/summary.md"
import json, statistics, sys
out, rounds, collectives, spans = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
def median_us(collective, span):
    return statistics.median(json.load(open(f"{out}/{collective}-{span}-r{r}.json"))["results"][0]["time_us"]["median"]
                             for r in range(1, rounds + 1))
print("| span | " + " | ".join(f"{c} (us) | x hot" for c in collectives) + " |")
print("|---|" + "---:|---:|" * len(collectives))
hot = {c: median_us(c, "hot") for c in collectives}
for span in spans:
    cells = []
    for c in collectives:
        t = median_us(c, span)
        cells.append(f"{t:.0f} | {t / hot[c]:.2f}")
    print(f"| {span} | " + " | ".join(cells) + " |")
PY
