#!/usr/bin/env bash
# Runs every parbench invocation listed in a sweep file and writes each report under
# results/<run-id>/: <name>.json and <name>.csv (the report files the run's command writes: a
# collective both, train, plan, pairs and info the JSON alone), <name>.log, plus manifest.json
# (schemas/sweep-manifest.schema.json) describing the machine and each run: its arguments,
# exit status and report files.
#   scripts/sweep.sh configs/sweeps/cpu-collectives.json
#   PARBENCH_RUN_ID=my-cluster scripts/sweep.sh configs/sweeps/cpu-collectives.json
#   PARBENCH_RESULTS_DIR=/scratch/results    where the run folders go (default results/)
#   PARBENCH_BUILD_DIR=build-gpu             which build to run, as it is (default build/, set up first)
# A sweep file (schemas/sweep.schema.json): {"description": "...", "runs": [{"name": "...", "ranks": 2,
# "args": ["all", "-b", "8"]}]}; names unique, of letters, digits, '-' and '_', not "manifest".
# A bad sweep file is one line and exit 2, before anything runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sweep=${1:?usage: scripts/sweep.sh configs/sweeps/NAME.json}
[[ -f $sweep ]] || { echo "error: sweep file '$sweep' not found; see configs/sweeps/" >&2; exit 2; }
run_id=${PARBENCH_RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)-$(hostname -s)}
[[ $run_id =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ && ${#run_id} -le 128 ]] ||
  { echo "error: PARBENCH_RUN_ID '$run_id' names a folder: use up to 128 letters, digits, '.', '-' or '_'" >&2; exit 2; }

# The sweep file is read in one place, scripts/sweep_file.py (against schemas/sweep.schema.json),
# by a python3 that has jsonschema: the one on PATH, else Debian's (setup.sh installs it there).
reader_python() {
  local python
  for python in python3 /usr/bin/python3; do
    "$python" -c "import jsonschema" 2>/dev/null && { echo "$python"; return 0; }
  done
  return 1
}
python=$(reader_python) || { "$root/scripts/setup.sh"; python=$(reader_python); } ||
  { echo "error: no python3 with jsonschema to read the sweep file; install python3-jsonschema" >&2; exit 2; }
# Its runs come as NUL-terminated fields (name, ranks, argument count, arguments), so no
# character of an argument can split one run or join two; a bad file is refused before
# anything runs or any folder is made.
runs_file=$(mktemp)
trap 'rm -f "$runs_file"' EXIT
"$python" "$root/scripts/sweep_file.py" "$sweep" >"$runs_file" || exit 2
mapfile -d '' -t fields <"$runs_file"
# PARBENCH_BUILD_DIR names a build to run as it is; the default build is set up first.
[[ -n ${PARBENCH_BUILD_DIR:-} ]] || "$root/scripts/setup.sh"

out=${PARBENCH_RESULTS_DIR:-$root/results}/$run_id
parbench=${PARBENCH_BUILD_DIR:-$root/build}/parbench
[[ -x $parbench ]] || { echo "error: no parbench at $parbench; build it (scripts/setup.sh) or fix PARBENCH_BUILD_DIR" >&2; exit 2; }
mkdir -p "$out"

# The report files a command writes, as its own --help lists them ("--json TEXT", "--csv TEXT"):
# collectives write both, train, plan, pairs and info JSON alone, compare neither (its --csv is a
# flag that prints CSV). Asked once per command.
declare -A report_flags=()
report_flags_of() {  # sets $kinds
  local command=$1 key="command:$1" help
  if [[ -z ${report_flags[$key]+set} ]]; then
    report_flags[$key]=""
    if [[ -n $command ]]; then
      help=$("$parbench" "$command" --help 2>/dev/null </dev/null || true)
      grep -Eq '^\s+(-\w+,)?--json TEXT' <<<"$help" && report_flags[$key]+=" json"
      grep -Eq '^\s+(-\w+,)?--csv TEXT' <<<"$help" && report_flags[$key]+=" csv"
    fi
  fi
  kinds=${report_flags[$key]}
}

manifest_runs=$(mktemp)
trap 'rm -f "$runs_file" "$manifest_runs"' EXIT
failed=0
next=0
while ((next < ${#fields[@]})); do
  name=${fields[next]}; ranks=${fields[next + 1]}; count=${fields[next + 2]}
  args=("${fields[@]:next + 3:count}")
  next=$((next + 3 + count))
  options=(-np "$ranks" -x OPENBLAS_NUM_THREADS=1)
  [[ $(id -u) -eq 0 ]] && options+=(--allow-run-as-root)
  ((ranks > $(nproc))) && options+=(--oversubscribe)
  command=""
  for arg in "${args[@]}"; do [[ $arg == -* ]] || { command=$arg; break; }; done
  outputs=()
  reports=()
  report_flags_of "$command"
  for kind in $kinds; do
    outputs+=("--$kind" "$out/$name.$kind")
    reports+=("$name.$kind")
  done
  printf 'sweep: %s (%s ranks): parbench%s\n' "$name" "$ranks" "$(printf ' %q' "${args[@]}")"
  status=0
  mpirun "${options[@]}" "$parbench" "${args[@]}" "${outputs[@]}" </dev/null >"$out/$name.log" 2>&1 || status=$?
  ((status == 0)) || { echo "sweep: $name failed with status $status (see $out/$name.log)" >&2; failed=$((failed + 1)); }
  # One run a record: name, ranks, exit status, then its report files and arguments, NUL-terminated.
  printf '%s\0' "$name" "$ranks" "$status" "${#reports[@]}" "${reports[@]}" "${#args[@]}" "${args[@]}" >>"$manifest_runs"
done

# The manifest (schemas/sweep-manifest.schema.json): the machine, and each run as it was made.
python3 - "$out/manifest.json" "$sweep" "$run_id" "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "$manifest_runs" <<'PY'
import json, os, platform, sys
path, sweep, run_id, git, runs_path = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
memory = next((l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal")), "0")
fields = open(runs_path, "rb").read().split(b"\0")[:-1]
fields = [field.decode("utf-8") for field in fields]
runs = []
while fields:
    name, ranks, status, count, *fields = fields
    reports, fields = fields[:int(count)], fields[int(count):]
    count, *fields = fields
    args, fields = fields[:int(count)], fields[int(count):]
    runs.append({"name": name, "ranks": int(ranks), "args": args, "exit_status": int(status),
                 "log": name + ".log", "reports": [r for r in reports if os.path.exists(os.path.join(os.path.dirname(path), r))]})
manifest = {
    "schema": "parbench.sweep-manifest/v1",
    "run_id": run_id, "sweep": sweep, "git": git,
    "machine": {"host": platform.node(), "kernel": platform.release(), "cpu": cpu,
                "cores": os.cpu_count(), "memory_gib": round(int(memory) / 2**20, 1)},
    "runs": runs,
}
partial = path + ".partial"
with open(partial, "w") as out:
    json.dump(manifest, out, indent=2)
os.replace(partial, path)
PY
echo "sweep: reports in $out"
((failed == 0))
