#!/usr/bin/env bash
# Runs every parbench invocation listed in a sweep file and writes each report under
# results/<run-id>/: <name>.json, <name>.csv, <name>.log, plus manifest.json describing
# the machine and each run's exit status.
#   scripts/sweep.sh configs/sweeps/cpu-collectives.json
#   PARBENCH_RUN_ID=my-cluster scripts/sweep.sh configs/sweeps/cpu-collectives.json
#   PARBENCH_RESULTS_DIR=/scratch/results    where the run folders go (default results/)
#   PARBENCH_BUILD_DIR=build-gpu             which build to run (default build/)
# A sweep file: {"description": "...", "runs": [{"name": "...", "ranks": 2, "args": ["all", "-b", "8"]}]}
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sweep=${1:?usage: scripts/sweep.sh configs/sweeps/NAME.json}
[[ -f $sweep ]] || { echo "error: sweep file '$sweep' not found; see configs/sweeps/" >&2; exit 2; }
"$root/scripts/setup.sh"

run_id=${PARBENCH_RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)-$(hostname -s)}
out=${PARBENCH_RESULTS_DIR:-$root/results}/$run_id
parbench=${PARBENCH_BUILD_DIR:-$root/build}/parbench
mkdir -p "$out"

# One line per run: name, ranks, then the arguments, tab-separated.
runs=$(python3 - "$sweep" <<'PY'
import json, sys
try:
    sweep = json.load(open(sys.argv[1]))
    for run in sweep["runs"]:
        assert run["name"].replace("-", "").replace("_", "").isalnum(), f"run name {run['name']!r}"
        print("\t".join([run["name"], str(int(run["ranks"]))] + [str(a) for a in run["args"]]))
except (ValueError, KeyError, AssertionError) as error:
    sys.exit(f"error: sweep file {sys.argv[1]}: {error!r}; see configs/sweeps/ for the format")
PY
)

statuses=()
while IFS=$'\t' read -r -a fields; do
  name=${fields[0]}; ranks=${fields[1]}; args=("${fields[@]:2}")
  options=(-np "$ranks" -x OPENBLAS_NUM_THREADS=1)
  [[ $(id -u) -eq 0 ]] && options+=(--allow-run-as-root)
  ((ranks > $(nproc))) && options+=(--oversubscribe)
  echo "sweep: $name ($ranks ranks): parbench ${args[*]}"
  status=0
  # mpirun reads standard input, which here is the list of runs still to do.
  mpirun "${options[@]}" "$parbench" "${args[@]}" --json "$out/$name.json" --csv "$out/$name.csv" \
    </dev/null >"$out/$name.log" 2>&1 || status=$?
  ((status == 0)) || echo "sweep: $name failed with status $status (see $out/$name.log)" >&2
  statuses+=("$name=$status")
done <<<"$runs"

python3 - "$out/manifest.json" "$sweep" "$run_id" "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "${statuses[@]}" <<'PY'
import json, os, platform, sys
path, sweep, run_id, git, *statuses = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
memory = next((l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal")), "0")
manifest = {
    "run_id": run_id, "sweep": sweep, "git": git,
    "machine": {"host": platform.node(), "kernel": platform.release(), "cpu": cpu,
                "cores": os.cpu_count(), "memory_gib": round(int(memory) / 2**20, 1)},
    "runs": [{"name": s.split("=")[0], "exit_status": int(s.split("=")[1])} for s in statuses],
}
json.dump(manifest, open(path, "w"), indent=2)
PY
echo "sweep: reports in $out"
failed=$(printf '%s\n' "${statuses[@]}" | grep -vc '=0$' || true)
((failed == 0))
