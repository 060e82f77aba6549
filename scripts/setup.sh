#!/usr/bin/env bash
# Installs the Debian packages parbench needs (only those missing; quiet when none are),
# then configures and builds into build/. Safe to run again: it only rebuilds what changed.
#   PARBENCH_CUDA=AUTO|ON|OFF   CUDA backend (default AUTO: on when nvcc is found)
#   PARBENCH_BUILD_DIR          build folder (default build/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${PARBENCH_BUILD_DIR:-$root/build}

packages=(cmake g++ make pkg-config openmpi-bin libopenmpi-dev libcli11-dev nlohmann-json3-dev libopenblas-dev
          libgtest-dev libbenchmark-dev python3 python3-jsonschema python3-matplotlib)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda=${PARBENCH_CUDA:-AUTO}
mkdir -p "$build_dir"
if [[ ! -f $build_dir/CMakeCache.txt ]] || ! grep -q "^PARBENCH_CUDA:STRING=$cuda$" "$build_dir/CMakeCache.txt"; then
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DPARBENCH_CUDA="$cuda" >"$build_dir/setup-configure.log" 2>&1 ||
    { cat "$build_dir/setup-configure.log"; exit 1; }
fi
cmake --build "$build_dir" -j"$(nproc)" >"$build_dir/setup-build.log" 2>&1 || { tail -n 60 "$build_dir/setup-build.log"; exit 1; }
