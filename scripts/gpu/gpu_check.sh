#!/usr/bin/env bash
# Checks parbench's GPU path on a machine with NVIDIA GPUs in one call, inside a deadline, and
# leaves its evidence in two files whatever happens (docs/gpus.md says what it proves).
#
#   scripts/gpu/gpu_check.sh [--bundle FILE|DIR] [--gpus N] [--deadline S] [--only STEPS] [--rehearse] OUTDIR
#
#   --bundle X   the bundle from scripts/gpu/gpu_bundle.sh (parbench-gpu.tar.xz, or it unpacked):
#                nothing is built here, and nothing but glibc, an NVIDIA driver and the CUDA
#                libraries (the toolkit's or pip's nvidia-* packages, found by the bundle's
#                env.sh) is needed. Without it, parbench is built from this tree into
#                build-gpu-check/ (scripts/setup.sh: Debian packages, a registry if any is missing).
#   --gpus N     GPUs (one rank each) for the multi-GPU steps; default: every GPU nvidia-smi
#                lists. With 1 the check proves what one GPU can; with 2 or more it adds every
#                data movement between GPUs (collectives, split groups, DP/TP/PP/EP training
#                over NCCL against the CPU, a rank stopped mid-collective).
#   --deadline S seconds for the whole check (default 480; 0: none). Every step's own limit is
#                clamped to what is left; a step that no longer fits is skipped, and says so.
#   --only A,B   run only these steps (names as the summary gives them), e.g. to redo two
#   --rehearse   no GPU is expected: unpack the bundle and run its CPU parts (info, one
#                collective over MPI at 1 and 2 ranks, one under a --background load, the GPU
#                test programs up to their "no GPU" skip), as tests/gpu_bundle does on a
#                machine without one.
#
# OUTDIR gets exactly two files, rewritten after every step, so that even a check killed from
# outside leaves what it had: summary.txt (a line per step: result, seconds, what it showed)
# and gpu-check-logs.tar.gz (every step's log and report; nccl_smoke.log holds NCCL_DEBUG=INFO).
# Exit status: 0 when every step that ran passed, 1 otherwise, 2 for a usage error.
#
# Order, most telling first: setup (bundle, CUDA libraries, ldd of every program), info and an
# NCCL smoke test, the refusal of two ranks on one GPU, the GPU unit tests, the MFU of a
# gpt2-124m bf16 step, GPU-against-CPU training (fp32 and bf16, dense and MoE), the collectives
# with validation, launch against CUDA-graph replay, the NVTX ranges, and collectives under
# --background loads. Every report a step
# reads must say backend nccl (the CPU references: mpi), or the step fails.
set -uo pipefail

usage() {  # [STATUS]: the header above, on stderr for a usage error, on stdout for --help
    if [[ ${1:-2} -eq 0 ]]; then
        sed -n '2,/^# Exit status/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    else
        sed -n '2,/^# Exit status/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    fi
    exit "${1:-2}"
}
[[ ${1:-} == -h || ${1:-} == --help ]] && usage 0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bundle_source="" gpus="" deadline=480 only="" rehearse=false
while [[ $# -gt 1 ]]; do
    case $1 in
        --bundle) bundle_source=$(realpath -m "$2"); shift 2 ;;
        --gpus) gpus=$2; shift 2 ;;
        --deadline) deadline=$2; shift 2 ;;
        --only) only=,$2,; shift 2 ;;
        --rehearse) rehearse=true; shift ;;
        *) echo "gpu_check: unknown argument '$1'" >&2; usage ;;
    esac
done
[[ $# -eq 1 && $1 != -* ]] || usage
[[ $deadline =~ ^[0-9]+$ ]] || { echo "gpu_check: --deadline $deadline: give whole seconds (0: none)" >&2; exit 2; }
[[ -z $gpus || $gpus =~ ^[1-9][0-9]*$ ]] || { echo "gpu_check: --gpus $gpus: give a positive count" >&2; exit 2; }
[[ $rehearse == false || -n $bundle_source ]] || { echo "gpu_check: --rehearse needs --bundle" >&2; exit 2; }
mkdir -p "$1" || exit 2
OUT=$(cd "$1" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/parbench-gpu-check.XXXXXX")
export LOGS=$work/logs
mkdir -p "$LOGS"
reserve=8  # seconds kept back at the deadline to write the two files

say() { printf '%s\n' "$*" | tee -a "$LOGS/gpu_check.log"; }
time_left() { ((deadline == 0)) && echo 100000 || echo $((deadline - SECONDS - reserve)); }

# ---- the two files ---------------------------------------------------------------------------
rows=()          # "name|result|seconds|note"
header=()
current=""       # the step running now, for a stop from outside
step_pid=""      # its timeout process
passed=0 failed=0 skipped=0
write_outputs() {
    local verdict=$1
    {
        printf '%s\n' "${header[@]}"
        printf '%-30s %-7s %5s  %s\n' step result time "what it showed"
        local row name result seconds note
        for row in "${rows[@]}"; do
            IFS='|' read -r name result seconds note <<<"$row"
            printf '%-30s %-7s %4ss  %s\n' "$name" "$result" "$seconds" "$note"
        done
        echo "$verdict"
    } > "$OUT/summary.txt.tmp" && mv "$OUT/summary.txt.tmp" "$OUT/summary.txt"
    cp "$OUT/summary.txt" "$LOGS/summary.txt"
    tar -czf "$OUT/gpu-check-logs.tar.gz.tmp" -C "$work" logs 2>/dev/null && mv "$OUT/gpu-check-logs.tar.gz.tmp" "$OUT/gpu-check-logs.tar.gz"
}
verdict_line() {
    echo "verdict: $passed passed, $failed failed, $skipped skipped; $1 after ${SECONDS}s (deadline ${deadline}s)"
}
record() {  # NAME RESULT SECONDS NOTE
    rows+=("$1|$2|$3|${4//|//}")
    case $2 in ok) passed=$((passed + 1)) ;; FAILED) failed=$((failed + 1)) ;; *) skipped=$((skipped + 1)) ;; esac
    say "-- $1: $2 ($3s) $4"
    write_outputs "$(verdict_line "still running")"
}
finish() {
    local status=$?
    trap - EXIT TERM INT
    if [[ -n $step_pid ]]; then
        kill -TERM "$step_pid" 2>/dev/null
        wait "$step_pid" 2>/dev/null
    fi
    [[ -n $current ]] && record "$current" FAILED 0 "stopped from outside while it ran (signal)"
    local how="done"
    ((failed > 0)) && how="done, with failures"
    [[ $stopped == true ]] && how="stopped by a signal"
    write_outputs "$(verdict_line "$how")"
    say ""
    cat "$OUT/summary.txt"
    rm -rf "$work"
    ((status == 0 && failed == 0)) || exit 1
    exit 0
}
stopped=false
trap finish EXIT
trap 'stopped=true; exit 143' TERM INT

# ---- steps -----------------------------------------------------------------------------------
selected() { [[ -z $only || $only == *",$1,"* ]]; }
# step NAME NEED LIMIT FUNCTION ARGS...: runs FUNCTION (exported, in its own bash) with its output
# in LOGS/NAME.log, under LIMIT seconds clamped to the time left; skipped when fewer than NEED
# seconds are left. The note is the log's last line (a reader's one-line verdict).
step() {
    local name=$1 need=$2 limit=$3 left status started note
    shift 3
    selected "$name" || return 0
    left=$(time_left)
    if ((left < need)); then
        record "$name" skipped 0 "not run: ${left}s left before the deadline, it needs ${need}s"
        return 0
    fi
    ((limit > left)) && limit=$left
    say "== $name (limit ${limit}s)"
    started=$SECONDS
    current=$name
    # In the background, so that a signal to this script is handled at once (bash runs traps
    # only between foreground commands); finish() then stops it.
    STEP=$name timeout --kill-after=5 "$limit" bash -c '"$@"' step "$@" > "$LOGS/$name.log" 2>&1 &
    step_pid=$!
    wait "$step_pid"
    status=$?
    step_pid=""
    current=""
    # The note: a failure's own line (a reader's FAILED, parbench's error) before mpirun's
    # banners, else the last line; report paths relative to the archive's logs/.
    note=$(grep -E '^(FAILED|error): ' "$LOGS/$name.log" | tail -n 1)
    [[ $status -ne 0 && -n $note ]] || note=$(grep -v -E '^[[:space:]]*$|^-+$' "$LOGS/$name.log" | tail -n 1)
    note=${note//$LOGS\//logs/}
    note=${note:0:220}
    if ((status == 0)); then
        record "$name" ok $((SECONDS - started)) "$note"
    else
        ((status == 124 || status == 137)) && note="over its ${limit}s limit; last line: $note"
        tail -n 15 "$LOGS/$name.log" | sed 's/^/   | /'
        record "$name" FAILED $((SECONDS - started)) "$note"
    fi
}

# Each step is a function run in a child bash (export -f); it exits non-zero to fail, and names
# its reports after the step (STEP), so that no two steps share a file.
launch() {  # RANKS PROGRAM ARGS...: one rank per GPU, under the bundle's or the system's mpirun
    local ranks=$1
    shift
    mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$@"
}
read_reports() { python3 "$READER" "$@"; }
check_info() {
    parbench info --json "$LOGS/$STEP.json" && read_reports info "$LOGS/$STEP.json" "$@"
}
nccl_smoke() {
    # NCCL's start-up (bootstrap, topology, channels) and one tiny checked collective: at one
    # rank alltoall, which still runs NCCL's send/receive kernels; with more, allreduce.
    local collective=alltoall
    (($1 > 1)) && collective=allreduce
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH launch "$1" parbench "$collective" -b 8 -e 1K -f 4 --warmup 2 --iters 5 \
        --backend nccl --json "$LOGS/$STEP.json" &&
        grep -m 1 'NCCL version' "$LOGS/$STEP.log" | sed 's/.*\(NCCL version [^ ]*\).*/\1/' &&
        read_reports backend nccl "$LOGS/$STEP.json"
}
one_gpu_refusal() {
    # Two ranks on one GPU: refused by every rank alike, in one line, exit status 2.
    local output status
    output=$(launch 2 parbench allreduce -b 8 -e 8 --backend nccl 2>&1)
    status=$?
    echo "$output"
    [[ $status -eq 2 ]] || { echo "FAILED: exit status $status, not 2"; return 1; }
    [[ $(grep -c '^error: ' <<<"$output") -eq 1 ]] || { echo "FAILED: not exactly one error line"; return 1; }
    grep -q '^error: --backend nccl: host .* runs 2 ranks but sees 1 GPUs' <<<"$output" ||
        { echo "FAILED: the error does not name 2 ranks on 1 GPU"; return 1; }
    echo "mpirun -np 2 on one GPU: refused in one line, exit status 2"
}
gtest_program() {  # RANKS PROGRAM [skip]: every test must run (none skipped), or with skip, every one skip
    local ranks=$1 program=$2 expect=${3:-run} output status
    output=$(launch "$ranks" "$program" --gtest_color=no 2>&1)
    status=$?
    echo "$output"
    local ran skipped
    ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' <<<"$output" | tail -n 1)
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' <<<"$output" | tail -n 1)
    [[ $status -eq 0 ]] || { echo "FAILED: exit status $status"; return 1; }
    [[ -n $ran && $ran -gt 0 ]] || { echo "FAILED: no test ran"; return 1; }
    if [[ $expect == skip ]]; then
        [[ ${skipped:-0} -eq $ran ]] || { echo "FAILED: ${skipped:-0} of $ran tests skipped, all should without a GPU"; return 1; }
        grep -q -i 'no GPU visible' <<<"$output" || { echo "FAILED: the skips do not say 'no GPU visible'"; return 1; }
        echo "$(basename "$program") at $ranks rank(s): all $ran tests skipped, saying no GPU is visible"
    else
        [[ ${skipped:-0} -eq 0 ]] || { echo "FAILED: $skipped of $ran tests skipped on a GPU machine"; return 1; }
        echo "$(basename "$program") at $ranks rank(s): $ran tests passed, none skipped"
    fi
}
mfu() {
    # The MFU of one gpt2-124m (llm.c's GPT-2 small) step in bf16: the precision llm.c and
    # Megatron quote theirs in, against the dense bf16 peak of the GPU's data sheet.
    launch 1 parbench train --model gpt2-124m --backend nccl --precision bf16 --global-batch 8 --warmup 2 --steps 5 \
        --json "$LOGS/$STEP.json" && read_reports mfu "$LOGS/$STEP.json"
}
gpu_against_cpu() {  # RANKS PRECISION LIMIT MODEL [ARGS...]: --check on the GPU, then the CPU, losses compared
    local ranks=$1 precision=$2 limit=$3 model=$4
    shift 4
    launch "$ranks" parbench train --model "$model" --backend nccl --precision "$precision" --warmup 1 --steps 4 --check \
        "$@" --json "$LOGS/${STEP}_gpu.json" &&
        OPENBLAS_NUM_THREADS=1 launch "$ranks" parbench train --model "$model" --backend mpi --precision "$precision" \
            --warmup 1 --steps 4 "$@" --json "$LOGS/${STEP}_cpu.json" &&
        read_reports losses "$LOGS/${STEP}_gpu.json" "$LOGS/${STEP}_cpu.json" "$limit"
}
collectives() {  # RANKS [ARGS...]: every collective, validated
    local ranks=$1
    shift
    launch "$ranks" parbench all -b 8 -e 256M -f 4 --check --backend nccl "$@" --json "$LOGS/$STEP.json" &&
        read_reports collectives "$LOGS/$STEP.json"
}
alltoallv_skew() {
    launch "$1" parbench alltoallv -b 8 -e 64M -f 8 --skew hot:1 --check --backend nccl --json "$LOGS/$STEP.json" &&
        read_reports backend nccl "$LOGS/$STEP.json"
}
launch_against_graph() {
    # alltoall runs NCCL's send/receive kernels even at one rank (allreduce there is a copy),
    # so the graph's saving is a kernel launch's.
    launch "$1" parbench alltoall -b 8 -e 1M -f 4 --check --backend nccl --json "$LOGS/${STEP}_launched.json" &&
        launch "$1" parbench alltoall -b 8 -e 1M -f 4 --check --backend nccl --graph --json "$LOGS/${STEP}_graph.json" &&
        read_reports graph "$LOGS/${STEP}_launched.json" "$LOGS/${STEP}_graph.json"
}
nvtx() {
    python3 "$NVTX_CHECKER" --recorder "$NVTX_RECORDER" --log-dir "$LOGS/$STEP" collective --collective alltoall \
        --sizes 8,16,32,64 --warmup 2 --iters 3 -- \
        mpirun --allow-run-as-root -np 1 parbench alltoall -b 8 -e 64 -f 2 --iters 3 --warmup 2 --backend nccl \
        --json "$LOGS/$STEP.json" && read_reports backend nccl "$LOGS/$STEP.json"
}
background() {  # RANKS BACKEND "COLLECTIVE LOAD"...: each collective at 4 MiB, checked, under its --background load
    local ranks=$1 backend=$2 pair collective load files=()
    shift 2
    for pair in "$@"; do
        read -r collective load <<<"$pair"
        files+=("$LOGS/${STEP}_${collective}_${load%%:*}.json")
        launch "$ranks" parbench "$collective" --size 4M --check --background "$load" --backend "$backend" \
            --json "${files[-1]}" || return 1
    done
    read_reports background "$backend" "${files[@]}"
}
stopped_rank() {
    # A rank stopped (SIGSTOP) in the middle of NCCL allreduces: the watchdog (--timeout) must
    # end the job, naming the rank, within its bound; the stopped rank is then killed.
    local ranks=$1 job victim output status
    launch "$ranks" parbench allreduce -b 1M -e 1M --iters 1000000 --warmup 1 --backend nccl --timeout 10 \
        > "$LOGS/$STEP.out" 2>&1 &
    job=$!
    for _ in $(seq 60); do
        kill -0 "$job" 2>/dev/null || break  # the job ended before its rank 1 was found
        victim=$(grep -alz '^OMPI_COMM_WORLD_RANK=1$' /proc/[0-9]*/environ 2>/dev/null | head -n 1 | cut -d/ -f3)
        [[ -n $victim ]] && grep -aq 'allreduce' "/proc/$victim/cmdline" 2>/dev/null && break
        victim=""
        sleep 1
    done
    if [[ -z $victim ]]; then
        kill "$job" 2>/dev/null
        cat "$LOGS/$STEP.out"
        echo "FAILED: rank 1 of the allreduce job was not found running"
        return 1
    fi
    sleep 5  # well inside the timed iterations
    kill -STOP "$victim"
    wait "$job"
    status=$?
    kill -KILL "$victim" 2>/dev/null
    output=$(cat "$LOGS/$STEP.out")
    echo "$output"
    [[ $status -ne 0 ]] || { echo "FAILED: the job ended with status 0 though rank 1 was stopped"; return 1; }
    grep -q 'rank 1' <<<"$output" || { echo "FAILED: the watchdog did not name rank 1"; return 1; }
    echo "rank 1 stopped mid-allreduce: the watchdog ended the job (status $status), naming rank 1"
}
export -f launch read_reports check_info nccl_smoke one_gpu_refusal gtest_program mfu gpu_against_cpu collectives \
    alltoallv_skew launch_against_graph nvtx background stopped_rank

# ---- setup: the programs, their libraries, the machine ------------------------------------------
unpack_bundle() {
    if [[ -d $bundle_source ]]; then
        echo "$bundle_source"
        return
    fi
    mkdir -p "$work/bundle"
    if command -v xz > /dev/null; then
        tar -C "$work/bundle" -xJf "$bundle_source"
    else  # no xz here: Python's tarfile reads it
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$bundle_source" "$work/bundle"
    fi || return 1
    echo "$work/bundle/parbench-gpu"
}
# Every ELF file of the bundle, under the bundle's libraries alone and then with the CUDA
# libraries env.sh found: first only CUDA libraries may be missing, then nothing; and every
# library the bundle carries must resolve to the bundle's copy.
check_libraries() {
    local problems=0 file
    while IFS= read -r -d '' file; do
        [[ $(head -c 4 "$file") == $'\x7fELF' ]] || continue
        local alone full
        alone=$(LD_LIBRARY_PATH=$PARBENCH_BUNDLE_LIBRARY_PATH ldd "$file" 2>&1)
        full=$(ldd "$file" 2>&1)
        echo "== ${file#"$PARBENCH_BUNDLE"/}"
        echo "$full"
        local missing
        missing=$(awk '/=> not found/ {print $1}' <<<"$alone" | grep -v -x -F -f "$PARBENCH_BUNDLE/cuda_libraries.txt")
        [[ -z $missing ]] && missing=$(awk '/=> not found/ {print $1}' <<<"$full")
        if [[ -n $missing ]]; then
            echo "MISSING: $(tr '\n' ' ' <<<"$missing")"
            problems=$((problems + 1))
        fi
        local soname path
        while read -r soname path; do
            [[ -e $PARBENCH_BUNDLE/lib/$soname && $path != "$PARBENCH_BUNDLE"/* ]] || continue
            echo "NOT THE BUNDLE'S: $soname => $path"
            problems=$((problems + 1))
        done < <(awk '$2 == "=>" && $3 != "not" {print $1, $3}' <<<"$full")
    done < <(find "$PARBENCH_BUNDLE" -type f \( -path '*/bin/*' -o -name '*.so*' \) -print0)
    return $((problems > 0))
}

setup_bundle() {
    local started=$SECONDS bundle note
    current=setup
    if ! bundle=$(unpack_bundle 2> "$LOGS/setup.log"); then
        current=""
        record setup FAILED $((SECONDS - started)) "cannot unpack $bundle_source: $(tail -n 1 "$LOGS/setup.log")"
        return 1
    fi
    # shellcheck source=scripts/gpu/gpu_bundle_env.sh
    PARBENCH_BUNDLE_VERBOSE=1 source "$bundle/env.sh" 2>> "$LOGS/setup.log"
    {
        sed -n '1,/^files:/p' "$PARBENCH_BUNDLE/MANIFEST.txt"
        echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
        echo "OPAL_PREFIX=$OPAL_PREFIX PMIX_INSTALL_PREFIX=$PMIX_INSTALL_PREFIX"
    } >> "$LOGS/setup.log"
    export READER=$PARBENCH_BUNDLE/scripts/gpu/gpu_check_reports.py NVTX_CHECKER=$PARBENCH_BUNDLE/tests/nvtx/check_nvtx_ranges.py
    export NVTX_RECORDER=$PARBENCH_BUNDLE/lib/libparbench_nvtx_recorder.so MOE_SIGMOID=$PARBENCH_BUNDLE/tests/train/llama-moe-sigmoid.json
    export GPU_TESTS=$PARBENCH_BUNDLE/bin/parbench_gpu_tests OPS_GPU_TESTS=$PARBENCH_BUNDLE/bin/parbench_ops_gpu_tests
    header+=("bundle:  $(sed -n 's/^revision: *//p' "$PARBENCH_BUNDLE/MANIFEST.txt"), $(sed -n 's/^compiled by: *//p' "$PARBENCH_BUNDLE/MANIFEST.txt")")
    check_libraries > "$LOGS/ldd.txt" 2>&1
    local ldd_problems=$?
    note="CUDA libraries: $(sed -n 's/^env.sh: \(lib[^:]*\): /\1 in /p' "$LOGS/setup.log" | tr '\n' ';' | sed 's/;$//')"
    current=""
    if [[ -n $PARBENCH_BUNDLE_PROBLEMS ]]; then
        record setup FAILED $((SECONDS - started)) "$(head -n 1 <<<"$PARBENCH_BUNDLE_PROBLEMS")"
    elif ((ldd_problems != 0)); then
        record setup FAILED $((SECONDS - started)) "ldd: $(grep -m 1 -E '^(MISSING|NOT THE)' "$LOGS/ldd.txt")"
    else
        record setup ok $((SECONDS - started)) "$note; ldd of every program: nothing missing"
    fi
}

setup_source_build() {
    local started=$SECONDS build=${PARBENCH_GPU_BUILD:-$ROOT/build-gpu-check}
    current=setup
    {
        # setup.sh installs what is missing (apt), configures for this machine's GPUs and builds.
        PARBENCH_CUDA=ON PARBENCH_BUILD_DIR=$build PARBENCH_BUILD_TARGETS="parbench parbench_gpu_tests parbench_ops_gpu_tests
            parbench_nvtx_recorder parbench_nvtx_nesting_demo" CUDAARCHS=native "$ROOT/scripts/setup.sh"
    } > "$LOGS/setup.log" 2>&1
    local status=$?
    current=""
    export PATH=$build:$PATH READER=$ROOT/scripts/gpu/gpu_check_reports.py NVTX_CHECKER=$ROOT/tests/nvtx/check_nvtx_ranges.py
    export NVTX_RECORDER=$build/tests/nvtx/libparbench_nvtx_recorder.so MOE_SIGMOID=$ROOT/tests/train/llama-moe-sigmoid.json
    export GPU_TESTS=$build/tests/gpu/parbench_gpu_tests OPS_GPU_TESTS=$build/tests/ops/parbench_ops_gpu_tests
    header+=("build:   $build from $(git -C "$ROOT" describe --always --dirty 2>/dev/null)")
    if ((status != 0)); then
        record setup FAILED $((SECONDS - started)) "scripts/setup.sh failed: $(tail -n 1 "$LOGS/setup.log")"
        return 1
    fi
    record setup ok $((SECONDS - started)) "built in $build"
}

header+=("parbench GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(uname -n)")
{
    nvidia-smi || echo "nvidia-smi failed or is missing: is the NVIDIA driver loaded?"
    nvidia-smi topo -m
    echo; echo "glibc $(getconf GNU_LIBC_VERSION 2>/dev/null); $(uname -srm)"
} > "$LOGS/machine.txt" 2>&1
visible=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
header+=("machine: ${visible} GPU(s)$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 | sed 's/^/: /')")
if [[ $rehearse == true ]]; then
    gpus=1
    header+=("mode:    rehearsal (no GPU expected): the bundle's CPU parts")
else
    gpus=${gpus:-$((visible > 0 ? visible : 1))}
    header+=("mode:    $gpus GPU(s)$( ((gpus > visible)) && echo ", but only $visible visible")")
fi
write_outputs "$(verdict_line "starting")"
for line in "${header[@]}"; do say "$line"; done

if [[ -n $bundle_source ]]; then setup_bundle; else setup_source_build || exit 1; fi

if [[ $rehearse == true ]]; then
    step info 5 30 check_info --no-gpu
    # --backend auto without a driver: the CPU, and the reports must say mpi.
    for ranks in 1 2; do
        step "collective_mpi_np$ranks" 5 60 bash -c 'launch "$1" parbench allreduce -b 8 -e 1M -f 8 --check --json "$LOGS/$STEP.json" &&
            read_reports backend mpi "$LOGS/$STEP.json" && echo "allreduce 8 B-1 MiB at $1 rank(s) over MPI (auto without a GPU): 0 wrong"' _ "$ranks"
    done
    step background_mpi 5 60 background 1 mpi "alltoall stream:1M"
    step gpu_tests_skip 5 60 gtest_program 1 "$GPU_TESTS" skip
    step ops_gpu_tests_skip 5 60 gtest_program 1 "$OPS_GPU_TESTS" skip
    exit 0
fi

step info 5 30 check_info
step nccl_smoke 10 60 nccl_smoke "$gpus"
((visible == 1)) && step one_gpu_refusal 5 30 one_gpu_refusal
step gpu_tests 20 120 gtest_program 1 "$GPU_TESTS"
step ops_gpu_tests 20 150 gtest_program 1 "$OPS_GPU_TESTS"
step mfu 30 150 mfu
# The CUDA ops against the CPU ops in whole training runs from the same seed and data, two
# micro-batches deep (so every first write lands a second time): each step's loss within 1e-4
# relative in fp32 (the GPU sums in other orders and fuses multiply-adds), 1e-3 in bf16 (a
# last-bit difference of an fp32 sum moves a bf16 operand by 2^-9; docs/training.md, "--check").
moe=(--moe-expert-capacity-factor 1.0 --moe-aux-loss-coeff 0.01)
step train_gpt-tiny_fp32 10 60 gpu_against_cpu 1 fp32 1e-4 gpt-tiny --microbatches 2
step train_llama-tiny_fp32 10 60 gpu_against_cpu 1 fp32 1e-4 llama-tiny --microbatches 2
step train_mlp-tiny_fp32 10 60 gpu_against_cpu 1 fp32 1e-4 mlp-tiny --microbatches 2
step train_gpt-tiny_bf16 10 60 gpu_against_cpu 1 bf16 1e-3 gpt-tiny --microbatches 2
step train_llama-tiny_bf16 10 60 gpu_against_cpu 1 bf16 1e-3 llama-tiny --microbatches 2
step train_llama-moe-tiny_fp32 10 90 gpu_against_cpu 1 fp32 1e-4 llama-moe-tiny "${moe[@]}"
step train_llama-moe-tiny_bf16 10 90 gpu_against_cpu 1 bf16 1e-3 llama-moe-tiny "${moe[@]}"
step train_moe-sigmoid_fp32 10 90 gpu_against_cpu 1 fp32 1e-4 "$MOE_SIGMOID" --moe-router-bias-update-rate 0.01 \
    --moe-expert-capacity-factor 1.0
step train_gpt-moe-tiny_fp32 10 90 gpu_against_cpu 1 fp32 1e-4 gpt-moe-tiny "${moe[@]}"
step collectives 20 150 collectives 1
step launch_against_graph 15 90 launch_against_graph 1
step nvtx 10 60 nvtx
# --background's GPU loads, each on a stream of its own beside the collective's: at one rank the
# second communicator's all-reduce is NCCL's copy, but a GEMM and a memory stream beside NCCL's
# send/receive kernels still contend for the GPU's SMs and memory.
step background 15 90 background 1 nccl "sendrecv gemm:4096" "alltoall stream:1G" "alltoall collective:64M"

if ((gpus >= 2)); then
    # Every data movement between GPUs: what one GPU cannot show (docs/gpus.md).
    step "gpu_tests_np$gpus" 20 180 gtest_program "$gpus" "$GPU_TESTS"
    step "collectives_np$gpus" 30 240 collectives "$gpus"
    ((gpus >= 4)) && step "collectives_groups_np$gpus" 30 240 collectives "$gpus" --groups $((gpus / 2))
    step "alltoallv_skew_np$gpus" 15 90 alltoallv_skew "$gpus"
    # Two communicators' all-reduces at once (issue 35's 256 KiB pair), and one beside a GEMM.
    step "background_np$gpus" 15 90 background "$gpus" nccl "allreduce collective:256K" "allreduce gemm:4096"
    step "launch_against_graph_np$gpus" 15 90 launch_against_graph "$gpus"
    step train_gpt-tiny_dp2 10 90 gpu_against_cpu 2 fp32 1e-4 gpt-tiny --dp 2 --microbatches 2
    step train_gpt-tiny_tp2 10 90 gpu_against_cpu 2 fp32 1e-4 gpt-tiny --tp 2 --microbatches 2
    step train_gpt-tiny_pp2 10 90 gpu_against_cpu 2 fp32 1e-4 gpt-tiny --pp 2 --microbatches 4
    step train_gpt-tiny_zero3 10 90 gpu_against_cpu 2 bf16 1e-3 gpt-tiny --dp 2 --zero 3 --microbatches 2
    step train_llama-moe-tiny_ep2 10 90 gpu_against_cpu 2 fp32 1e-4 llama-moe-tiny --ep 2 "${moe[@]}"
    step train_llama-moe-tiny_ep2_overlap 10 90 gpu_against_cpu 2 fp32 1e-4 llama-moe-tiny --ep 2 --moe-a2a-overlap "${moe[@]}"
    step stopped_rank 30 90 stopped_rank 2
fi
