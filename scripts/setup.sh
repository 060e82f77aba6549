#!/usr/bin/env bash
# Installs the Debian packages parbench needs (only those missing; quiet when none are),
# then configures and builds into build/. Safe to run again: it only rebuilds what changed.
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

cuda=${PARBENCH_CUDA:-AUTO}
mkdir -p "$build_dir"
if [[ ! -f $build_dir/CMakeCache.txt ]] || ! grep -q "^PARBENCH_CUDA:STRING=$cuda$" "$build_dir/CMakeCache.txt" ||
   ! grep -q "^PARBENCH_MPI:STRING=$mpi$" "$build_dir/CMakeCache.txt"; then
  # ccache: a second build folder (MPICH beside Open MPI) then compiles only the files whose
  # preprocessed source differs, those that include mpi.h; the rest are the first build's.
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DPARBENCH_CUDA="$cuda" -DPARBENCH_MPI="$mpi" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >"$build_dir/setup-configure.log" 2>&1 ||
    { cat "$build_dir/setup-configure.log"; exit 1; }
fi
targets=()
for target in ${PARBENCH_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}" >"$build_dir/setup-build.log" 2>&1 || { tail -n 60 "$build_dir/setup-build.log"; exit 1; }
