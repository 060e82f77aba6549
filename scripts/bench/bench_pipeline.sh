#!/usr/bin/env bash
# Measured vs theoretical pipeline bubble for every schedule at p = 2 (one stage per core on
# a 2-core machine) with m = 4, 8, 16, and per-stage peak activation memory, GPipe vs 1F1B.
#
#   scripts/bench/bench_pipeline.sh [BUILD_DIR] [MODEL]     (defaults: build, configs/models/gpt-small.json)
#
# Prints a table; the reports stay in $OUT (default: a temporary folder).
set -euo pipefail
BUILD=${1:-build}
MODEL=${2:-gpt-small}
OUT=${OUT:-$(mktemp -d)}
MPI=(mpirun --allow-run-as-root -np 2 -x OPENBLAS_NUM_THREADS=1)
STEPS=${STEPS:-5}

printf "%-12s %4s %4s %10s %12s %11s %11s %14s %14s\n" schedule m v measured theoretical "stage0" "stage1" "act0 MiB" "act1 MiB"
for m in 4 8 16; do
  for schedule in gpipe 1f1b interleaved zb-h1; do
    extra=()
    v=1
    if [ "$schedule" = interleaved ]; then extra=(--virtual-stages 2); v=2; fi
    report="$OUT/${schedule}_m${m}.json"
    "${MPI[@]}" "$BUILD/parbench" train --model "$MODEL" --pp 2 --schedule "$schedule" "${extra[@]}" \
      --microbatches "$m" --global-batch "$m" --warmup 2 --steps "$STEPS" --json "$report" > /dev/null
    python3 - "$report" "$schedule" "$m" "$v" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
b, stages = r["bubble"], r["pipeline"]["per_stage"]
mib = [s["activations_peak_bytes"] / 2**20 for s in stages]
print("%-12s %4s %4s %10.3f %12.3f %11.3f %11.3f %14.1f %14.1f" % (sys.argv[2], sys.argv[3], sys.argv[4], b["measured"],
      b["theoretical"], b["measured_per_stage"][0], b["measured_per_stage"][1], mib[0], mib[1]))
PY
  done
done
echo "# reports in $OUT; bubble = 1 - compute / step pipeline time per rank (docs/pipeline.md)"
