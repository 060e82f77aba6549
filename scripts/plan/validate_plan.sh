#!/usr/bin/env bash
# The advisor check of issue #12: calibrate `parbench plan` from a collective sweep and an ops
# report measured on this machine, predict the step time of gpt-small layouts at 2 ranks (and
# at 4, oversubscribed on 2 cores, marked as such), run each with `parbench train`, and print
# predicted vs measured with the error, the median error, and Kendall's tau between the
# predicted and the measured ranking. Measured step times are medians over ROUNDS alternating
# rounds (each run's own median over its timed steps).
#
# Data parallelism averages its gradients (op avg), which MPI does not have: parbench's MPI backend
# sums and then divides on the host, a pass the sum's sweep does not hold. The calibration sweeps
# the averaged all-reduce and reduce-scatter apart (--op avg), at every size from 8 B to 32 MiB
# (factor 2: the gradient buckets' sizes lie where Open MPI's times leave a line), and plan prices
# the dp lines with them.
#
# Compute is each layer's work on a GEMM curve fitted to the ops report's matmuls (plan
# --gemm-curve), so a layout's micro-batch shapes and its pipeline stages' unequal work (the
# embedding on the first, the head on the last) show; its level is a one-rank train run of the same
# model at a 2-rank layout's batch per rank (COMPUTE_FROM=train, the default: plan sets the curve to
# that run's step less its optimizer) or the ops' own (COMPUTE_FROM=ops): since the CPU ops were
# vectorised, the ops' isolated, cache-warm timings sum to about 80 % of the same work inside a
# step on this VM (81 ms against 103 ms a gpt-small step of 4 sequences, 2026-12-02), which every
# ops-levelled prediction then misses by about that much. The cluster's memory bandwidth, at which
# plan prices element-wise work, is the rate the ops report's element-wise kernels (layer norm,
# GELU, residual, encoder, cross-entropy) reach on a step's own sizes, taken whole (fraction 1): the
# large copy's DRAM rate, at an assumed 0.8, priced tensor parallelism's replicated element-wise
# work 3-4x too slow on tensors that stay in cache.
#
# Inside a step the compute between two collectives evicts their buffers from the caches, which a
# sweep's loop over one pair of buffers never does: on this VM a 1 MiB reduce-scatter took 2.9x and
# an all-gather 5.2x their hot time on buffers out of cache, what train's calls take in a step
# (results/2026-12-05-off-cache). The calibration sweeps therefore run off cache (IMB's -off_cache:
# --off-cache $OFF_CACHE, default 64M, twice the span past which this VM's times stop rising), and
# plan prices every collective at those times. REUSE_CALIBRATION=1 on a folder whose sweeps ran hot
# (no config.off_cache_bytes) measures the sweeps again now, off cache (their load recorded apart).
#
# The host, as the layouts run on it (plan/host_contention.hpp, plan/host_overlap.hpp): two ranks
# computing at once on 2 cores share the caches, memory bandwidth and turbo, so each computes
# slower than the one-rank run alone. The calibration also runs that one-rank run once per core,
# started together (compute-busy-*.json, twice the steps so each run's median falls where the
# others compute); plan takes their median step over the alone one as the busy-core slowdown
# (--calibrate-compute-busy): for every step of a layout whose ranks compute in step, for the part
# of a pipeline's timeline when its stages compute together. And with as many ranks as cores,
# nothing is left to move the bytes while they compute (Open MPI copies, reduces and progresses its
# non-blocking collectives on the ranks' own cores, inside their MPI calls): plan prices every
# collective exposed there, --overlap and --prefetch hiding nothing. Fitted on nothing here: both
# levels come from the calibration step. With REUSE_CALIBRATION=1 on a folder of an older
# calibration (no compute-busy-*.json), the busy runs are measured now (their load recorded apart).
#
# What train issues non-blocking there (ddp --overlap's bucket all-reduces, ZeRO --overlap's
# reduce-scatters, ZeRO-3 --prefetch's gathers: MPI_I* requests polled with MPI_Test) still costs
# more than the blocking call: Open MPI runs it on libnbc's schedule, not its tuned blocking
# algorithm (a 14.9 MB averaged all-reduce off cache 9.8-10.3 ms against 7.1,
# results/2026-12-05-off-cache). The calibration sweeps those three at 2 ranks as IMB-NBC's pure
# non-blocking benchmarks time them (--nonblocking: the MPI_I* call and its wait), off cache, the
# reductions averaged as train's (coll-nonblocking-*-np2.json), and plan prices the requests of
# the layouts that issue them from those (plan/host_overlap.hpp). The 4-rank layouts issue none.
# REUSE_CALIBRATION=1 on a folder without them sweeps them now (their load recorded apart).
#
#   scripts/plan/validate_plan.sh [OUT_DIR]      (env: BUILD=build ROUNDS=2 STEPS=6 COMPUTE_FROM=train OFF_CACHE=64M; REUSE_CALIBRATION=1
#                                            keeps OUT_DIR's sweeps and ops report; REUSE_MEASUREMENTS=1
#                                            also keeps its train runs, to rerun only the predictions
#                                            after a change to the plan's model)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$here/build}
out=${1:-$here/results/validate-plan-$(date -u +%Y%m%dT%H%M%SZ)}
rounds=${ROUNDS:-2}
steps=${STEPS:-6}
compute_from=${COMPUTE_FROM:-train}
off_cache=${OFF_CACHE:-64M}
[[ $compute_from == train || $compute_from == ops ]] ||
  { echo "error: COMPUTE_FROM=$compute_from: use train (a one-rank train report) or ops (the ops report)" >&2; exit 2; }
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
mpi=(mpirun --allow-run-as-root --oversubscribe)
pb=$build/parbench
for tool in "$pb" "$build/parbench-ops"; do
  [[ -x $tool ]] || { echo "error: $tool is missing; build first (cmake --build $build)" >&2; exit 1; }
done

# Other processes on the host slow calibration and measurement unevenly (the calibration's short
# bursts less than the train runs): the 1-minute load average is recorded beside each phase.
load_now() { cut -d' ' -f1 /proc/loadavg; }
# What a rerun needs to compare with: the revision, the host, the settings; the table goes to
# summary.md beside the reports.
{
  echo "started $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "revision $(git -C "$here" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$here" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "cores $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "BUILD=$build ROUNDS=$rounds STEPS=$steps COMPUTE_FROM=$compute_from OFF_CACHE=$off_cache REUSE_CALIBRATION=${REUSE_CALIBRATION:-} REUSE_MEASUREMENTS=${REUSE_MEASUREMENTS:-}"
} > "$out/run-info.txt"
averaged=(allreduce reducescatter)
# What train issues non-blocking, with the op it reduces by ("" for a gather).
nonblocking=(allreduce:avg reducescatter:avg allgather:)
cores=$(nproc)
train_compute=(train --model gpt-small --global-batch 4 --precision fp32 --warmup 2 --quiet)
# The compute level with every core busy: the one-rank run once per core, started together (each
# its own singleton), the way a layout's ranks compute at once (plan/host_contention.hpp). Twice
# the steps, so that each run's median step falls where the others compute too.
busy_calibration() {
  load_now > "$out/load-calibration-busy.txt"
  local pids=() i
  for i in $(seq 1 "$cores"); do
    "$pb" "${train_compute[@]}" --steps $((2 * steps)) --json "$out/compute-busy-$i.json" < /dev/null > /dev/null &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
}
# The collective sweeps at 2 and 4 ranks, off cache, the averaged ones apart.
sweep_calibration() {
  local np collective
  for np in 2 4; do
    "${mpi[@]}" -np $np "$pb" all -b 8 -e 32M -f 4 --off-cache "$off_cache" -q --json "$out/coll-np$np.json" < /dev/null
    for collective in "${averaged[@]}"; do
      "${mpi[@]}" -np $np "$pb" "$collective" --op avg -b 8 -e 32M -f 2 --off-cache "$off_cache" -q \
        --json "$out/coll-avg-$collective-np$np.json" < /dev/null
    done
  done
}
# train's non-blocking calls at 2 ranks, off cache: each the MPI_I* call and its wait (--nonblocking).
# Out of place only: the MPI backend's non-blocking reduce-scatter has no in-place form, and the
# fit reads the out-of-place half of every sweep.
nonblocking_calibration() {
  local entry collective op
  for entry in "${nonblocking[@]}"; do
    IFS=: read -r collective op <<< "$entry"
    "${mpi[@]}" -np 2 "$pb" "$collective" ${op:+--op "$op"} --nonblocking --placement out -b 8 -e 32M -f 2 \
      --off-cache "$off_cache" -q --json "$out/coll-nonblocking-$collective-np2.json" < /dev/null
  done
}
swept_off_cache() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["config"].get("off_cache_bytes") or "")' "$1"
}
if [[ -n ${REUSE_CALIBRATION:-} && -f $out/ops.json ]]; then
  echo "# calibration: reusing $out/coll-np*.json, coll-avg-*.json and ops.json" >&2
  if [[ $compute_from == train && ! -f $out/compute-busy-1.json ]]; then
    echo "# calibration: no $out/compute-busy-*.json (an older calibration): measuring the busy-core compute now" >&2
    busy_calibration
  fi
  if [[ ! -f $out/coll-np2.json || -z $(swept_off_cache "$out/coll-np2.json") ]]; then
    echo "# calibration: $out/coll-*.json ran on hot buffers (an older calibration): sweeping again now, off cache" >&2
    load_now > "$out/load-calibration-sweeps.txt"
    sweep_calibration
  fi
  if [[ ! -f $out/coll-nonblocking-allreduce-np2.json ]]; then
    echo "# calibration: no $out/coll-nonblocking-*.json (an older calibration): sweeping train's non-blocking calls now" >&2
    load_now > "$out/load-calibration-nonblocking.txt"
    nonblocking_calibration
  fi
else
  echo "# calibration: collective sweeps at 2 and 4 ranks off cache (the averaged ones apart), the gpt-small ops" >&2
  load_now > "$out/load-calibration.txt"
  sweep_calibration
  nonblocking_calibration
  "$build/parbench-ops" --benchmark_filter='cpu/(gpt-small|peak)/' --benchmark_min_time=0.05 \
    --benchmark_format=json --benchmark_out="$out/ops.json" > /dev/null 2>&1
  "$pb" "${train_compute[@]}" --steps "$steps" --json "$out/compute-train.json" < /dev/null > /dev/null
  busy_calibration
fi
# Compute by each GEMM's shape on the curve fitted to the ops report's matmuls (so a pipeline's
# micro-batches and its stages' unequal work show), set to the one-rank train run's measured step
# (COMPUTE_FROM=train) or at the ops' own isolated level (COMPUTE_FROM=ops).
compute=(--gemm-curve "$out/ops.json")
[[ $compute_from == train ]] &&
  compute+=(--calibrate-compute "$out/compute-train.json" --calibrate-compute-busy "$out"/compute-busy-*.json)
echo "# compute: the GEMM curve of $out/ops.json$([[ $compute_from == train ]] && echo ", set to $out/compute-train.json's step")" >&2
read -r peak bandwidth < <(python3 - "$out/ops.json" <<'PY'
import json, sys
benchmarks = json.load(open(sys.argv[1]))["benchmarks"]
best = max(b.get("FLOP/s", 0) for b in benchmarks if "/peak/sgemm" in b["name"])
# The element-wise kernels' own rate: the bytes the ops report's gpt-small element-wise ops move
# over their time (a step's tensors are cache-sized; a large copy's DRAM rate is 2-4x slower).
elementwise = [b for b in benchmarks if "/gpt-small/" in b["name"]
               and not any(kind in b["name"] for kind in ("matmul", "attention", "adamw"))]
moved = sum(b["bytes/s"] * b["real_time"] for b in elementwise)
spent = sum(b["real_time"] for b in elementwise)
print(best / 1e12, moved / spent / 1e9)
PY
)
# 4 ranks on 2 cores share them: plan computes each rank at cores/ranks of the calibrated rate.
for np in 2 4; do
  cat > "$out/cluster-np$np.json" <<JSON
{"device": {"name": "this VM's CPU cores (a core per rank, shared when oversubscribed)", "peak_tflops_bf16": $peak, "peak_tflops_fp32": $peak,
            "memory_gib": 4, "memory_bandwidth_gbps": $bandwidth, "memory_fraction": 1,
            "intra_host": {"latency_us": 5, "busbw_gbps": 5}, "cross_host": {"latency_us": 50, "busbw_gbps": 1}},
 "gpus": $np, "gpus_per_host": $np, "cores_per_host": $cores}
JSON
done

# name | ranks | flags shared by train and plan
layouts=(
  "ddp|2|--zero 0"
  "ddp-overlap|2|--zero 0 --overlap"
  "zero1|2|--zero 1"
  "zero2|2|--zero 2"
  "zero3|2|--zero 3"
  "zero3-prefetch|2|--zero 3 --prefetch --overlap"
  "tp2|2|--tp 2"
  "tp2-sp|2|--tp 2 --sp"
  "pp2-1f1b|2|--pp 2 --schedule 1f1b --microbatches 4"
  "pp2-gpipe|2|--pp 2 --schedule gpipe --microbatches 4"
  "pp2-zb-h1|2|--pp 2 --schedule zb-h1 --microbatches 4"
  "pp2-interleaved|2|--pp 2 --schedule interleaved --virtual-stages 2 --microbatches 4"
  "dp4|4|--zero 0"
  "dp4-zero1|4|--zero 1"
  "dp2-tp2|4|--tp 2"
  "dp2-pp2|4|--pp 2 --microbatches 2"
)
common=(--model gpt-small --global-batch 8 --precision fp32)

echo "# predictions" >&2
for np in 2 4; do
  for collective in "${averaged[@]}"; do
    [[ -f $out/coll-avg-$collective-np$np.json ]] ||
      echo "# note: no $out/coll-avg-$collective-np$np.json (an older calibration): plan prices dp's averaged $collective at $np ranks by the sum's sweep, without MPI's division pass" >&2
  done
done
for call in "${nonblocking[@]}"; do
  [[ -f $out/coll-nonblocking-${call%%:*}-np2.json ]] ||
    echo "# note: no $out/coll-nonblocking-${call%%:*}-np2.json: plan prices train's non-blocking ${call%%:*} as the blocking call" >&2
done
for entry in "${layouts[@]}"; do
  IFS='|' read -r name np flags <<< "$entry"
  sweeps=("$out/coll-np$np.json")
  for collective in "${averaged[@]}"; do
    [[ -f $out/coll-avg-$collective-np$np.json ]] && sweeps+=("$out/coll-avg-$collective-np$np.json")
  done
  for call in "${nonblocking[@]}"; do
    [[ -f $out/coll-nonblocking-${call%%:*}-np$np.json ]] && sweeps+=("$out/coll-nonblocking-${call%%:*}-np$np.json")
  done
  # shellcheck disable=SC2086  # the layout's flags are split into words on purpose
  "$pb" plan "${common[@]}" $flags --gpus "$np" --states parbench --cluster "$out/cluster-np$np.json" \
    --calibrate "${sweeps[@]}" "${compute[@]}" --json "$out/plan-$name.json" > /dev/null
done

if [[ -n ${REUSE_MEASUREMENTS:-} ]]; then
  echo "# measurements: reusing $out/train-*-r*.json" >&2
  rounds_to_run=0
else
  echo "# measurements: $rounds alternating rounds of $steps timed steps" >&2
  load_now > "$out/load-measurements.txt"
  rounds_to_run=$rounds
fi
for round in $(seq 1 "$rounds_to_run"); do
  for entry in "${layouts[@]}"; do
    IFS='|' read -r name np flags <<< "$entry"
    # shellcheck disable=SC2086
    "${mpi[@]}" -np "$np" "$pb" train "${common[@]}" $flags --warmup 2 --steps "$steps" --quiet \
      --json "$out/train-$name-r$round.json" < /dev/null > /dev/null
  done
done

if [[ $rounds_to_run -gt 0 ]]; then load_now >> "$out/load-measurements.txt"; fi
python3 - "$out" "$rounds" "${layouts[@]}" <<'PY' | tee "$out/summary.md"
import json, os, statistics, sys
out, rounds, entries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = []
for entry in entries:
    name, np, _ = entry.split("|", 2)
    predicted = json.load(open(f"{out}/plan-{name}.json"))["layouts"][0]
    results = [json.load(open(f"{out}/train-{name}-r{r}.json"))["results"][0] for r in range(1, rounds + 1)]
    m = statistics.median(r["step_time_ms"]["median"] for r in results)
    # What train measured of the same parts: the busiest rank's compute (its step less the time
    # it was blocked in communication) and the exposed communication, medians over the rounds.
    measured_parts = (statistics.median(max(r["stragglers"]["compute_ms_by_rank"]) for r in results),
                      statistics.median(r["exposed_comm_ms"] for r in results))
    rows.append((name, int(np), predicted["time_ms"]["step"], m, predicted, measured_parts))

def kendall_tau(a, b):
    n, s = len(a), 0
    for i in range(n):
        for j in range(i + 1, n):
            x, y = a[i] - a[j], b[i] - b[j]
            s += (x > 0) - (x < 0) if y > 0 else -((x > 0) - (x < 0)) if y < 0 else 0
    return s / (n * (n - 1) / 2) if n > 1 else float("nan")

lines = ["| layout | ranks | predicted (ms) | measured (ms) | error | compute | exposed comm | bubble | optimizer "
         "| measured compute | measured exposed comm |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for np in (2, 4):
    subset = [r for r in rows if r[1] == np]
    for name, _, p, m, pred, (measured_compute, measured_exposed) in subset:
        t = pred["time_ms"]
        exposed = t["exposed_tp"] + t["exposed_dp"] + t["exposed_pp"]
        mark = " (oversubscribed)" if np > 2 else ""
        lines.append(f"| {name}{mark} | {np} | {p:.1f} | {m:.1f} | {100 * (p - m) / m:+.1f}% | {t['compute']:.1f} | "
                     f"{exposed:.1f} | {t['bubble']:.1f} | {t['optimizer']:.1f} | {measured_compute:.1f} | "
                     f"{measured_exposed:.1f} |")
print("\n".join(lines))
for np in (2, 4):
    subset = [r for r in rows if r[1] == np]
    errors = [abs(p - m) / m for _, _, p, m, _, _ in subset]
    tau = kendall_tau([r[2] for r in subset], [r[3] for r in subset])
    best_measured = min(subset, key=lambda r: r[3])[0]
    top2 = [r[0] for r in sorted(subset, key=lambda r: r[2])[:2]]
    print(f"\n{np} ranks{' (oversubscribed on 2 cores)' if np > 2 else ''}: median |error| "
          f"{100 * statistics.median(errors):.1f}%, Kendall tau {tau:.2f} over {len(subset)} layouts; best measured "
          f"{best_measured}, predicted top 2 {top2}: {'in' if best_measured in top2 else 'NOT in'} the top 2")
cores = os.cpu_count() or 1
loads = {}
for phase in ("calibration", "calibration-busy", "calibration-sweeps", "calibration-nonblocking", "measurements"):
    try:
        loads[phase] = [float(x) for x in open(f"{out}/load-{phase}.txt").read().split()]
    except (OSError, ValueError):
        loads[phase] = []
shown = "; ".join(f"{phase} {', '.join(f'{x:.1f}' for x in values)}" for phase, values in loads.items() if values)
if shown:
    print(f"\nload average (1 min) on {cores} cores: {shown}")
    if max(x for values in loads.values() for x in values) > cores:
        print("warning: the host was busier than its cores: other processes slowed the runs (and the calibration "
              "unevenly), so the errors above measure the load as much as the plan; rerun on an idle host")
PY
