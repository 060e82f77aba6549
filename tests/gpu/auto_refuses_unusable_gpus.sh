#!/usr/bin/env bash
# --backend auto on a host whose NVIDIA driver is loaded but whose GPUs cannot be used (the
# CUDA plugin does not load, or CUDA fails) must refuse, saying why, instead of measuring the
# CPU under a GPU run's name; --backend mpi must still run there, and with no driver auto
# still picks the CPU.
#
#   auto_refuses_unusable_gpus.sh PARBENCH MPIEXEC
#
# The driver's presence is faked where parbench looks for it (/proc/driver/nvidia/gpus lists
# a GPU) inside a private mount namespace, so nothing outside this test sees it. No GPU is
# needed: on a machine without libcuda the plugin loads and cudaGetDeviceCount fails; a
# second copy of parbench gets a plugin that cannot load at all. Exits 77 (skipped) where no
# mount namespace can be made.
set -uo pipefail
parbench=$1
mpiexec=$2
export OPENBLAS_NUM_THREADS=1

if ! unshare -m --propagation private true 2>/dev/null; then
    echo "cannot make a mount namespace here (unshare -m): skipped"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Runs "$@" where a GPU driver seems loaded; prints its output, then "status N".
with_fake_driver() {
    unshare -m --propagation private bash -c '
        mount -t tmpfs parbench-test /proc/driver && mkdir -p /proc/driver/nvidia/gpus/0000:00:00.0 || exit 99
        "$@"' fake "$@" 2>&1
    echo "status $?"
}

# expect_refusal NAME FRAGMENT COMMAND...: exit 2, one error line, naming auto and FRAGMENT.
expect_refusal() {
    local name=$1 fragment=$2
    shift 2
    local output
    output=$(with_fake_driver "$@")
    echo "--- $name"; echo "$output"
    grep -q '^status 2$' <<<"$output" || fail "$name: exit status is not 2"
    [[ $(grep -c '^error: ' <<<"$output") -eq 1 ]] || fail "$name: not exactly one error line"
    grep -q '^error: --backend auto: this host has an NVIDIA driver, but its GPUs cannot be used (' <<<"$output" ||
        fail "$name: the error does not say that the GPUs cannot be used"
    grep -qF -- "$fragment" <<<"$output" || fail "$name: the error does not give the reason ($fragment)"
    grep -q 'give --backend mpi' <<<"$output" || fail "$name: the error does not name the way out"
    grep -q '^# backend' <<<"$output" && fail "$name: it measured anyway"
}

run_args=(allreduce -b 8 -e 64 --iters 2 --warmup 1)

# The build's own plugin: it loads, and CUDA finds no usable driver behind the fake one.
expect_refusal "plugin loads, CUDA fails" "cudaGetDeviceCount" "$parbench" "${run_args[@]}"
expect_refusal "plugin loads, CUDA fails, two ranks" "cudaGetDeviceCount" \
    "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$parbench" "${run_args[@]}"

# A plugin that cannot load: a copy of parbench beside a file of the plugin's name that is no
# library. (parbench opens the plugin beside its own binary.)
mkdir "$work/broken"
cp "$parbench" "$work/broken/parbench"
echo "not a shared object" > "$work/broken/libparbench_cuda.so"
expect_refusal "plugin does not load" "the CUDA plugin did not load" "$work/broken/parbench" "${run_args[@]}"

# The way out still works under the fake driver, and without it auto measures the CPU.
output=$(with_fake_driver "$parbench" "${run_args[@]}" --backend mpi)
echo "--- --backend mpi under the fake driver"; echo "$output"
grep -q '^status 0$' <<<"$output" || fail "--backend mpi did not run where the GPUs cannot be used"
grep -q '^# backend mpi' <<<"$output" || fail "--backend mpi did not report backend mpi"
output=$("$parbench" "${run_args[@]}" 2>&1; echo "status $?")
echo "--- auto without a driver"; echo "$output"
grep -q '^status 0$' <<<"$output" || fail "auto without a driver did not run"
grep -q '^# backend mpi' <<<"$output" || fail "auto without a driver did not pick the CPU (backend mpi)"

if ((failures > 0)); then
    echo "$failures check(s) failed"
    exit 1
fi
echo "auto refuses unusable GPUs: every check passed"
