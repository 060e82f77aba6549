#!/usr/bin/env bash
# Checks the GPU path on a machine with NVIDIA GPUs, in one go and in under 10 minutes:
# build with CUDA, run the GPU and NVTX tests, then measure every collective with
# validation over NCCL, alltoallv under skews, allreduce with and without CUDA graphs, the MFU
# of a gpt2-124m training step, the dense models trained on the GPU against the same runs on
# the CPU (fp32, and gpt-tiny under bf16), and MoE models trained on the GPU against --check's reference (ep 1 on one GPU;
# ep 2, blocking and with --moe-a2a-overlap, too where two GPUs are seen).
# Everything it prints, logs and reports lands in OUTDIR; the summary at the end says which
# steps failed.
#
#   scripts/gpu_check.sh OUTDIR
#
# Made for a fresh, offline machine run as root: it calls scripts/setup.sh (apt) when a
# dependency is missing, and says exactly what is still missing when that cannot help.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: scripts/gpu_check.sh OUTDIR" >&2
    exit 2
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
BUILD=${PARBENCH_GPU_BUILD:-$ROOT/build-gpu-check}
JOBS=$(nproc)
MPIRUN=(mpirun --allow-run-as-root -np 1)
exec > >(tee "$OUT/gpu_check.log") 2>&1

FAILED=()
step() { echo; echo "== [$(date +%T), ${SECONDS}s] $*"; }
# Runs a step under a time limit, logging to OUT/<name>.log; a failure is recorded, and the
# later steps still run, so one broken collective does not hide the other measurements.
run_step() {
    local name=$1 limit=$2
    shift 2
    step "$name: $*"
    if timeout --kill-after=10 "$limit" "$@" > >(tee "$OUT/$name.log") 2>&1; then
        echo "-- $name: ok"
    else
        local status=$?
        echo "-- $name: FAILED (exit $status$([[ $status -eq 124 ]] && echo ", over its ${limit}s limit"))"
        FAILED+=("$name")
    fi
}

missing_dependencies() {
    local missing=()
    command -v cmake > /dev/null || missing+=("cmake (>= 3.25)")
    command -v g++ > /dev/null || missing+=("g++")
    command -v python3 > /dev/null || missing+=("python3")
    command -v mpirun > /dev/null && command -v mpicxx > /dev/null || missing+=("OpenMPI (libopenmpi-dev, openmpi-bin)")
    [[ -f /usr/include/CLI/CLI.hpp ]] || missing+=("CLI11 (libcli11-dev)")
    [[ -f /usr/include/nlohmann/json.hpp ]] || missing+=("nlohmann-json (nlohmann-json3-dev)")
    compgen -G "/usr/include/*/cblas.h" > /dev/null || [[ -f /usr/include/cblas.h ]] ||
        missing+=("CBLAS (libopenblas-dev)")
    compgen -G "/usr/lib/*/cmake/GTest" > /dev/null || compgen -G "/usr/lib/cmake/GTest" > /dev/null ||
        missing+=("GoogleTest (libgtest-dev)")
    [[ -x /usr/local/cuda/bin/nvcc ]] || command -v nvcc > /dev/null || missing+=("CUDA toolkit (nvcc)")
    [[ -f /usr/local/cuda/include/nccl.h || -f /usr/include/nccl.h ]] || missing+=("NCCL (nccl.h, libnccl)")
    printf '%s\n' "${missing[@]}"
}

step "machine"
nvidia-smi || echo "nvidia-smi not found or failed: is the NVIDIA driver loaded?"
nvidia-smi topo -m > "$OUT/topology.txt" 2>&1 || true
(/usr/local/cuda/bin/nvcc --version || nvcc --version) 2>&1 | tail -2 || true

step "dependencies"
missing=$(missing_dependencies)
configured_by_setup=false
if [[ -n $missing && -x $ROOT/scripts/setup.sh ]]; then
    echo "missing:"; echo "$missing" | sed 's/^/  /'
    # setup.sh installs the packages, then configures and builds everything into the folder
    # it is given: this script's build folder, so nothing is built twice.
    echo "running scripts/setup.sh (apt; fails without a reachable package registry)"
    if PARBENCH_BUILD_DIR=$BUILD PARBENCH_CUDA=ON timeout 420 "$ROOT/scripts/setup.sh" > "$OUT/setup.log" 2>&1; then
        configured_by_setup=true
    else
        echo "scripts/setup.sh failed: see $OUT/setup.log"
    fi
    missing=$(missing_dependencies)
fi
if [[ -n $missing ]]; then
    echo "cannot build: still missing"
    echo "$missing" | sed 's/^/  - /'
    echo "install them (Debian/Ubuntu package names in parentheses) and rerun"
    exit 3
fi
echo "all found"

# Only the architecture of the GPU here (sm_90), which halves the CUDA compile time.
[[ $configured_by_setup == true ]] ||
    run_step configure 120 cmake -S "$ROOT" -B "$BUILD" -DPARBENCH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_BUILD_TYPE=Release
# parbench builds the CUDA plugin beside it (libparbench_cuda.so); the label-gpu tests live in
# parbench_gpu_tests and parbench_ops_gpu_tests (CUDA ops against the CPU ops).
run_step build 360 cmake --build "$BUILD" -j "$JOBS" --target parbench parbench_gpu_tests parbench_ops_gpu_tests \
    parbench_nvtx_recorder parbench_nvtx_nesting_demo
if [[ ! -x $BUILD/parbench ]]; then
    echo "no parbench binary: stopping here"
    exit 1
fi
PARBENCH=$BUILD/parbench

run_step gpu_tests 150 ctest --test-dir "$BUILD" -L gpu --output-on-failure
run_step nvtx_tests 60 ctest --test-dir "$BUILD" -L nvtx --output-on-failure
run_step info 30 "${MPIRUN[@]}" "$PARBENCH" info --json "$OUT/info.json"
run_step all_collectives 180 "${MPIRUN[@]}" "$PARBENCH" all -b 8 -e 256M -f 4 --check --backend nccl \
    --json "$OUT/all.json"
# alltoallv's grouped send/recv with skewed blocks (the even one ran in `all`). On one GPU
# (one rank) each call is the rank's block to itself: the path runs, the skew cannot show.
run_step alltoallv_skew 60 "${MPIRUN[@]}" "$PARBENCH" alltoallv -b 8 -e 64M -f 8 --skew hot:1 --check --backend nccl \
    --json "$OUT/alltoallv_hot1.json"
run_step alltoallv_zipf 45 "${MPIRUN[@]}" "$PARBENCH" alltoallv -b 8 -e 16M -f 8 --skew zipf:1.2 --check --backend nccl \
    --json "$OUT/alltoallv_zipf.json"
# Its transpose, an MoE layer's combine: the hot rank sends, every rank receives its buffer back.
run_step alltoallv_combine 60 "${MPIRUN[@]}" "$PARBENCH" alltoallv -b 8 -e 64M -f 8 --skew hot:1 --direction combine \
    --check --backend nccl --json "$OUT/alltoallv_hot1_combine.json"
# Launch overhead: the same small allreduces launched one by one and replayed from a graph.
run_step allreduce_launch 45 "${MPIRUN[@]}" "$PARBENCH" allreduce -b 8 -e 1M -f 2 --check --backend nccl \
    --json "$OUT/allreduce_launch.json"
run_step allreduce_graph 45 "${MPIRUN[@]}" "$PARBENCH" allreduce -b 8 -e 1M -f 2 --check --backend nccl --graph \
    --json "$OUT/allreduce_graph.json"
if [[ -f $OUT/allreduce_launch.json && -f $OUT/allreduce_graph.json ]]; then
    run_step graph_vs_launch 30 "$PARBENCH" compare "$OUT/allreduce_launch.json" "$OUT/allreduce_graph.json"
fi

# One training step's worth on the GPU: gpt2-124m (the llm.c model) over NCCL on one rank, its
# MFU against the peak table's figure for this GPU (docs/training.md, "MFU"). The CUDA plugin
# (libparbench_cuda.so beside the binary) is what serves it.
run_step train_gpt2_124m 150 "${MPIRUN[@]}" "$PARBENCH" train --model gpt2-124m --backend nccl --global-batch 8 \
    --warmup 2 --steps 5 --json "$OUT/train_gpt2_124m.json"
if [[ -f $OUT/train_gpt2_124m.json ]]; then
    python3 - "$OUT/train_gpt2_124m.json" <<'PY' | tee "$OUT/mfu.txt"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
mfu = r.get("mfu")
print("gpt2-124m train step: %.2f ms median, %.2f TFLOP/s per rank, MFU %s" % (
    r["step_time_ms"]["median"], r["achieved_tflops_per_rank"],
    "unknown (no peak for this GPU)" if mfu is None else "%.1f %%" % (100 * mfu)))
PY
fi

# The dense models' CUDA ops against the CPU ops in whole training runs, from the same seed and
# data: gpt-tiny (LayerNorm, GELU, the first-write forms of the matmul's input gradient, GELU and
# the vocab-shard cross-entropy, AdamW clearing its gradients), llama-tiny (RMSNorm, SwiGLU's
# first write, RoPE, grouped-query attention) and mlp-tiny. Two micro-batches, so every first
# write lands a second time on what the first micro-batch left. --check holds the GPU run to a
# serial GPU run; the CPU run (--backend mpi) holds both to the CPU ops, which the unit tests
# hold to finite differences: each step's loss must agree to 1e-4 relative (CPU runs of
# different layouts agree to 1e-7; the GPU sums in other orders and fuses products into FMAs).
# The comparison, written beside the reports so the log names a file rather than printing code.
cat > "$OUT/compare_losses.py" <<'PY'
import json, math, sys
gpu, cpu = (json.load(open(path))["results"][0]["loss"] for path in sys.argv[1:3])
limit = float(sys.argv[3])
if len(gpu) != len(cpu):
    sys.exit("%d GPU losses against %d CPU losses" % (len(gpu), len(cpu)))
print("GPU losses %s\nCPU losses %s" % (gpu, cpu))
if not all(isinstance(loss, (int, float)) and math.isfinite(loss) for loss in gpu + cpu):
    sys.exit("a loss is not finite")
worst = max(abs(g - c) / abs(c) for g, c in zip(gpu, cpu))
print("largest relative difference %.2e (limit %g)" % (worst, limit))
sys.exit(0 if worst <= limit else 1)
PY
for model in gpt-tiny llama-tiny mlp-tiny; do
    run_step "train_${model}_nccl_check" 60 "${MPIRUN[@]}" "$PARBENCH" train --model "$model" --backend nccl \
        --microbatches 2 --warmup 1 --steps 4 --check --json "$OUT/train_${model}_nccl.json"
    run_step "train_${model}_cpu" 60 "${MPIRUN[@]}" "$PARBENCH" train --model "$model" --backend mpi \
        --microbatches 2 --warmup 1 --steps 4 --json "$OUT/train_${model}_cpu.json"
    if [[ -f $OUT/train_${model}_nccl.json && -f $OUT/train_${model}_cpu.json ]]; then
        run_step "train_${model}_gpu_vs_cpu" 30 python3 "$OUT/compare_losses.py" "$OUT/train_${model}_nccl.json" \
            "$OUT/train_${model}_cpu.json" 1e-4
    fi
done
# The same under --precision bf16 (cuBLAS bf16 GEMMs, the input gradient's first write with beta
# 0) against the CPU's exact emulation: a last-bit difference of an fp32 sum can move a bf16
# operand by 2^-9, so the limit is 1e-3 (docs/training.md, "--check"); a first write that read
# its buffer would still show, as a NaN or a loss off by far more.
run_step train_gpt-tiny_bf16_nccl_check 60 "${MPIRUN[@]}" "$PARBENCH" train --model gpt-tiny --backend nccl \
    --precision bf16 --microbatches 2 --warmup 1 --steps 4 --check --json "$OUT/train_gpt-tiny_bf16_nccl.json"
run_step train_gpt-tiny_bf16_cpu 60 "${MPIRUN[@]}" "$PARBENCH" train --model gpt-tiny --backend mpi \
    --precision bf16 --microbatches 2 --warmup 1 --steps 4 --json "$OUT/train_gpt-tiny_bf16_cpu.json"
if [[ -f $OUT/train_gpt-tiny_bf16_nccl.json && -f $OUT/train_gpt-tiny_bf16_cpu.json ]]; then
    run_step train_gpt-tiny_bf16_gpu_vs_cpu 30 python3 "$OUT/compare_losses.py" "$OUT/train_gpt-tiny_bf16_nccl.json" \
        "$OUT/train_gpt-tiny_bf16_cpu.json" 1e-3
fi

# Mixture of experts on the GPU (kernels/moe.cu, cuBLAS experts, NCCL dispatch/combine), each
# run against --check's single-process reference: Mixtral-style softmax routing with capacity
# dropping and the balancing loss, DeepSeek-V3-style sigmoid routing with the bias update, and
# GPT's GELU experts.
# One GPU is one rank, so ep 1 (dispatch and combine are local); with two GPUs, ep 2 runs the
# alltoallv between them.
run_step train_moe_nccl_check 90 "${MPIRUN[@]}" "$PARBENCH" train --model llama-moe-tiny --backend nccl --warmup 1 \
    --steps 3 --check --moe-expert-capacity-factor 1.0 --moe-aux-loss-coeff 0.01 --json "$OUT/train_moe_nccl.json"
run_step train_moe_sigmoid_nccl_check 60 "${MPIRUN[@]}" "$PARBENCH" train --model "$ROOT/tests/train/llama-moe-sigmoid.json" \
    --backend nccl --warmup 1 --steps 3 --check --moe-router-bias-update-rate 0.01 --moe-expert-capacity-factor 1.0 \
    --json "$OUT/train_moe_sigmoid_nccl.json"
# GPT's MoE layers: GELU experts through the same kernels, with dropping and the balancing loss.
run_step train_moe_gpt_nccl_check 90 "${MPIRUN[@]}" "$PARBENCH" train --model gpt-moe-tiny --backend nccl --warmup 1 \
    --steps 3 --check --moe-expert-capacity-factor 1.0 --moe-aux-loss-coeff 0.01 --json "$OUT/train_moe_gpt_nccl.json"
if (( $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') >= 2 )); then
    run_step train_moe_ep2_nccl_check 90 mpirun --allow-run-as-root -np 2 "$PARBENCH" train --model llama-moe-tiny \
        --backend nccl --ep 2 --warmup 1 --steps 3 --check --moe-expert-capacity-factor 1.0 \
        --json "$OUT/train_moe_ep2_nccl.json"
    # The same with each exchange as two ialltoallv halves on NCCL's side stream, overlapping
    # the other half's experts (--moe-a2a-overlap): --check holds only if no kernel reads a
    # half's rows before it has arrived.
    run_step train_moe_ep2_overlap_nccl_check 90 mpirun --allow-run-as-root -np 2 "$PARBENCH" train \
        --model llama-moe-tiny --backend nccl --ep 2 --moe-a2a-overlap --warmup 1 --steps 3 --check \
        --moe-expert-capacity-factor 1.0 --json "$OUT/train_moe_ep2_overlap_nccl.json"
else
    echo "train_moe_ep2_nccl_check, train_moe_ep2_overlap_nccl_check: skipped, one GPU here (ep 2 needs two ranks, one GPU each)"
fi

step "summary"
if [[ ${#FAILED[@]} -eq 0 ]]; then
    echo "every step passed; reports and logs in $OUT" | tee "$OUT/summary.txt"
    exit 0
fi
echo "failed steps: ${FAILED[*]}; see their logs in $OUT" | tee "$OUT/summary.txt"
exit 1
