#!/usr/bin/env bash
# Installs the Debian packages parbench needs (only those missing), then configures and builds
# into build/. Safe to run again: it only rebuilds what changed. It says what it does in a few
# lines: the packages it installs, the configuration (CUDA on or off, and why), the build's
# progress at each quarter and the time each part took; the full output is in the build
# folder's setup-configure.log and setup-build.log.
#   PARBENCH_CUDA=AUTO|ON|OFF   CUDA backend (default AUTO: on when nvcc is found)
#   PARBENCH_MPI=openmpi|mpich  MPI implementation (default openmpi; mpich builds into build-mpich/)
#   PARBENCH_BUILD_DIR          build folder (default build/, or build-mpich/)
#   PARBENCH_BUILD_TARGETS      build only these targets (default: all)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mpi=${PARBENCH_MPI:-openmpi}
[[ $mpi == openmpi || $mpi == mpich ]] || { echo "setup: PARBENCH_MPI=$mpi: use openmpi or mpich" >&2; exit 2; }
default_build=$root/build
[[ $mpi == mpich ]] && default_build=$root/build-mpich
build_dir=${PARBENCH_BUILD_DIR:-$default_build}

packages=(cmake g++ make pkg-config ccache openmpi-bin libopenmpi-dev libcli11-dev nlohmann-json3-dev libopenblas-dev
          libgtest-dev libbenchmark-dev python3 python3-jsonschema python3-matplotlib
          time)  # GNU time: the fault suite measures a refused run's peak RSS with it
[[ $mpi == mpich ]] && packages+=(mpich libmpich-dev)
source "$root/scripts/debian_packages.sh"
install_missing_packages setup "${packages[@]}"

# "1m12s" or "4s"
took() {
  local seconds=$((SECONDS - $1))
  ((seconds >= 60)) && echo "$((seconds / 60))m$((seconds % 60))s" || echo "${seconds}s"
}
shown=${build_dir#"$root"/}

cuda=${PARBENCH_CUDA:-AUTO}
mkdir -p "$build_dir"
if [[ ! -f $build_dir/CMakeCache.txt ]] || ! grep -q "^PARBENCH_CUDA:STRING=$cuda$" "$build_dir/CMakeCache.txt" ||
   ! grep -q "^PARBENCH_MPI:STRING=$mpi$" "$build_dir/CMakeCache.txt"; then
  started=$SECONDS
  echo "setup: configuring $shown/ (Release, $mpi, PARBENCH_CUDA=$cuda)"
  # ccache: a second build folder (MPICH beside Open MPI) then compiles only the files whose
  # preprocessed source differs, those that include mpi.h; the rest are the first build's.
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DPARBENCH_CUDA="$cuda" -DPARBENCH_MPI="$mpi" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >"$build_dir/setup-configure.log" 2>&1 ||
    { cat "$build_dir/setup-configure.log"; exit 1; }
  backend=$(grep -o 'CUDA backend [A-Z]*' "$build_dir/setup-configure.log" | tail -n 1 || true)
  echo "setup: configured in $(took "$started"): ${backend:-CUDA backend unknown}"
fi
targets=()
for target in ${PARBENCH_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
jobs=$(nproc)
started=$SECONDS
# The build's own lines go to the log; the terminal gets a line at each quarter of CMake's
# progress ("[ 52%] Building ...") with the files compiled so far and the time, once the build
# has run 10 s (a short rebuild says only its last line).
files() { (($1 == 1)) && echo "1 file" || echo "$1 files"; }
compiled=0 linked=0 next_quarter=25 announced=0
while IFS= read -r line; do
  printf '%s\n' "$line" >>"$build_dir/setup-build.log"
  case $line in
    *"Building "*) compiled=$((compiled + 1)) ;;
    *"Linking "*) linked=$((linked + 1)) ;;
    *) continue ;;
  esac
  if ((!announced)); then
    echo "setup: building $shown/ with $jobs jobs (a first build takes minutes; the full output goes to $shown/setup-build.log)"
    announced=1
  fi
  [[ $line =~ ^\[\ *([0-9]+)%\] ]] || continue
  percent=${BASH_REMATCH[1]}
  while ((percent >= next_quarter && next_quarter < 100)); do
    ((SECONDS - started >= 10)) && echo "setup:   $next_quarter% after $(took "$started") ($(files "$compiled") compiled)"
    next_quarter=$((next_quarter + 25))
  done
done < <(: >"$build_dir/setup-build.log"; cmake --build "$build_dir" -j"$jobs" "${targets[@]}" 2>&1; echo "setup-build-status $?")
status=$(tail -n 1 "$build_dir/setup-build.log")
status=${status#setup-build-status }
if [[ $status != 0 ]]; then
  tail -n 60 "$build_dir/setup-build.log"
  echo "setup: the build failed after $(took "$started") (full log: $build_dir/setup-build.log)" >&2
  exit 1
fi
if ((compiled + linked == 0)); then
  echo "setup: $shown/ is up to date ($(took "$started"))"
else
  echo "setup: built $shown/ in $(took "$started"): $(files "$compiled") compiled, $linked linked"
fi
