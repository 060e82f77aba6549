#!/usr/bin/env bash
# Sets up if needed, builds, and runs the whole CTest suite (units, multi-rank, end-to-end;
# GPU tests skip, saying why, when no GPU is visible). Extra arguments go to ctest, e.g.
#   scripts/test.sh -L unit
#   PARBENCH_MPI=mpich scripts/test.sh -L mpi     # the same suite over MPICH, built in build-mpich/
#   scripts/test.sh --sanitize    ASan + UBSan build in build-sanitize/ (CPU only), running the
#                                 unit, mpi and e2e labels; Open MPI's own leaks are suppressed
#                                 (tests/sanitize/lsan.supp says which and why)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export OPENBLAS_NUM_THREADS=1
if [[ ${1:-} == --sanitize ]]; then
  shift
  export PARBENCH_BUILD_DIR=${PARBENCH_SANITIZE_BUILD_DIR:-$root/build-sanitize}
  # Exported, not only given to setup.sh: tests that set up themselves (sweep, docs) would
  # otherwise reconfigure this folder with CUDA and as Release in the middle of the suite.
  export PARBENCH_CUDA=OFF
  mkdir -p "$PARBENCH_BUILD_DIR"
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$root" -B "$PARBENCH_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARBENCH_CUDA=OFF \
    -DPARBENCH_SANITIZE=ON "${launcher[@]}" >"$PARBENCH_BUILD_DIR/setup-configure.log" 2>&1 ||
    { cat "$PARBENCH_BUILD_DIR/setup-configure.log"; exit 1; }
  "$root/scripts/setup.sh"
  # Leaks are errors, except Open MPI's own; UBSan stops at the first report with a stack.
  # Allocation stacks are unwound fully (slowly): Open MPI's libraries have no frame
  # pointers, so the fast unwinder stops inside them and, once MPI_Finalize has unloaded the
  # component that allocated, no frame names a library the suppressions know. (Three Llama
  # cp x tp runs check no leaks: tests/context_train/CMakeLists.txt says why.)
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0:fast_unwind_on_malloc=0
  export LSAN_OPTIONS=suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  cd "$PARBENCH_BUILD_DIR"
  exec ctest --output-on-failure --timeout 900 -L 'unit|mpi|e2e' "$@"
fi
"$root/scripts/setup.sh"
default_build=$root/build
[[ ${PARBENCH_MPI:-openmpi} == mpich ]] && default_build=$root/build-mpich
cd "${PARBENCH_BUILD_DIR:-$default_build}"
ctest --output-on-failure --timeout 600 "$@"
