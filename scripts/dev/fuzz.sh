#!/usr/bin/env bash
# Runs one libFuzzer target for a given time: scripts/dev/fuzz.sh TARGET SECONDS [RUNS]
#   TARGET: size_parse, model_config, compare_report, cluster_file or calibration (tests/fuzz/fuzz_TARGET.cpp),
#   or sweep (tests/fuzz/fuzz_sweep.py: the Python sweep file reader under atheris, libFuzzer for Python)
#   RUNS: stop after this many executions instead (libFuzzer's -runs), SECONDS still bounding it
# Installs Debian's clang if missing, builds the targets with -fsanitize=fuzzer,address,undefined
# in build-fuzz/, starts from the seed corpus in tests/fuzz/corpus/TARGET (read only; new inputs
# go to build-fuzz/corpus/TARGET) and prints libFuzzer's execution count. A crash leaves its
# input in build-fuzz/crashes/: copy it into the seed corpus, so CTest replays it from then on.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${1:?usage: scripts/dev/fuzz.sh TARGET SECONDS (size_parse, model_config, compare_report, cluster_file, calibration, sweep)}
seconds=${2:?usage: scripts/dev/fuzz.sh TARGET SECONDS [RUNS]}
runs=${3:--1}
[[ $seconds =~ ^[0-9]+$ && $runs =~ ^(-1|[0-9]+)$ ]] || { echo "fuzz.sh: SECONDS and RUNS are whole numbers" >&2; exit 2; }
# Every target stops after SECONDS or RUNS executions; an input running over 10 s is a hang.
limits=(-max_total_time="$seconds" -runs="$runs" -timeout=10 -print_final_stats=1)
if [[ -f $root/tests/fuzz/fuzz_$target.py ]]; then
  # A Python target: atheris from PyPI in a virtual environment of the python3 on PATH.
  venv=$root/build-fuzz/venv
  if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import atheris, jsonschema" 2>/dev/null; then
    echo "fuzz.sh: installing atheris and jsonschema into $venv"
    mkdir -p "$root/build-fuzz"
    python3 -m venv "$venv" || { echo "fuzz.sh: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
    "$venv/bin/pip" install -q "atheris==3.0.0" "jsonschema>=4,<5"
  fi
  mkdir -p "$root/build-fuzz/corpus/$target" "$root/build-fuzz/crashes"
  status=0
  "$venv/bin/python" "$root/tests/fuzz/fuzz_$target.py" "${limits[@]}" -artifact_prefix="$root/build-fuzz/crashes/$target-" \
    "$root/build-fuzz/corpus/$target" "$root/tests/fuzz/corpus/$target" >"$root/build-fuzz/fuzz-$target.log" 2>&1 ||
    status=$?
  grep -E "^(Done|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY| === Uncaught)" "$root/build-fuzz/fuzz-$target.log" || true
  exit "$status"
fi
[[ -f $root/tests/fuzz/fuzz_$target.cpp ]] || { echo "fuzz.sh: no target '$target'" >&2; exit 2; }
# Configuring the project needs its packages (scripts/setup.sh's list) and clang for libFuzzer.
packages=(clang cmake make openmpi-bin libopenmpi-dev libcli11-dev nlohmann-json3-dev libopenblas-dev libgtest-dev
          libbenchmark-dev)
source "$root/scripts/debian_packages.sh"
install_missing_packages fuzz.sh "${packages[@]}"
build=$root/build-fuzz
if [[ ! -f $build/CMakeCache.txt ]]; then
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DPARBENCH_CUDA=OFF \
    -DPARBENCH_FUZZ=ON >"$build/fuzz-configure.log" 2>&1 || { cat "$build/fuzz-configure.log"; exit 1; }
fi
cmake --build "$build" --target "fuzz_$target" -j"$(nproc)" >"$build/fuzz-build.log" 2>&1 ||
  { tail -n 40 "$build/fuzz-build.log"; exit 1; }
mkdir -p "$build/corpus/$target" "$build/crashes"
cd "$build"
status=0
"./tests/fuzz/fuzz_$target" "${limits[@]}" -artifact_prefix="$build/crashes/$target-" \
  "$build/corpus/$target" "$root/tests/fuzz/corpus/$target" >"$build/fuzz-$target.log" 2>&1 || status=$?
grep -E "^(Done|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" "$build/fuzz-$target.log" || true
exit "$status"
