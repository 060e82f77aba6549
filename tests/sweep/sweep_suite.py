#!/usr/bin/env python3
"""scripts/sweep.sh against hostile sweep files, and the path of its arguments.

bad_files: each broken file is one line naming the file, the place and the fix, exit 2, and
    nothing ran and no results folder was made.
arguments: a stand-in parbench (it records its argv) run by sweep.sh under mpirun at 1 and 2
    ranks: every argument arrives whole (spaces, quotes, globs, $(...), an empty one, non-ASCII),
    the manifest records each run's exit status, and one failing run fails the sweep.

Usage: sweep_suite.py CASE
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SWEEP = os.path.join(ROOT, "scripts", "sweep.sh")

# A parbench that writes its arguments, NUL-terminated, to the --json path (rank 0 only), and
# exits with the status after "--exit", if given. Its --help lists the report flags as parbench's
# does: command "nocsv" has --json alone (as train, plan, pairs), "noreport" none (as compare),
# the others both (as a collective); it records its arguments only where it has --json.
STAND_IN = r"""#!/usr/bin/env bash
if [[ ${2:-} == --help ]]; then
  [[ $1 == noreport ]] || echo "  --json TEXT                 Write the report as JSON"
  [[ $1 == noreport || $1 == nocsv ]] || echo "  --csv TEXT                  Write the results as CSV"
  exit 0
fi
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
args=("$@"); status=0; json=""
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ ${args[i]} == --exit ]] && status=${args[i + 1]}
  [[ ${args[i]} == --json ]] && json=${args[i + 1]}
done
[[ $rank == 0 && -n $json ]] && printf '%s\0' "$@" >"$json"
exit "$status"
"""
MANIFEST_SCHEMA = os.path.join(ROOT, "schemas", "sweep-manifest.schema.json")


def check(condition, message):
    if not condition:
        raise AssertionError(message)


class Context:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="parbench-sweep-")
        self.build = os.path.join(self.tmp, "build")
        os.makedirs(self.build)
        stand_in = os.path.join(self.build, "parbench")
        with open(stand_in, "w") as out:
            out.write(STAND_IN)
        os.chmod(stand_in, os.stat(stand_in).st_mode | stat.S_IXUSR)
        self.results = os.path.join(self.tmp, "results")

    def sweep(self, document, run_id="test"):
        path = os.path.join(self.tmp, "sweep.json")
        with open(path, "w", encoding="utf-8") as out:
            out.write(document if isinstance(document, str) else json.dumps(document))
        env = dict(os.environ, PARBENCH_BUILD_DIR=self.build, PARBENCH_RESULTS_DIR=self.results,
                   PARBENCH_RUN_ID=run_id)
        return subprocess.run([SWEEP, path], capture_output=True, text=True, timeout=240, env=env,
                              stdin=subprocess.DEVNULL)

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def run(name, args, ranks=1):
    return {"name": name, "ranks": ranks, "args": args}


# (what, the sweep file, words its one error line must hold)
BAD = [
    ("newline in an argument", {"runs": [run("a", ["all", "-b\n8"])]}, ["runs[0].args[1]", "control characters"]),
    ("tab in an argument", {"runs": [run("a", ["all\t-b", "8"])]}, ["runs[0].args[0]", "one argument per list item"]),
    ("run named manifest", {"runs": [run("manifest", ["all"])]}, ["runs[0].name", "not 'manifest'"]),
    ("run named Manifest", {"runs": [run("Manifest", ["all"])]}, ["runs[0].name", "not 'manifest'"]),
    ("duplicate names", {"runs": [run("a", ["all"]), run("b", ["all"]), run("A", ["all"])]},
     ["runs[2].name", "also the name of runs[0]"]),
    ("path in a name", {"runs": [run("../up", ["all"])]}, ["runs[0].name", "letters, digits"]),
    ("ranks 0", {"runs": [run("a", ["all"], ranks=0)]}, ["runs[0].ranks is 0", "from 1"]),
    ("ranks -1", {"runs": [run("a", ["all"], ranks=-1)]}, ["runs[0].ranks is -1"]),
    ("ranks 1.5", {"runs": [run("a", ["all"], ranks=1.5)]}, ["runs[0].ranks is 1.5", "whole number"]),
    ("ranks a string", {"runs": [run("a", ["all"], ranks="2")]}, ["runs[0].ranks", "whole number"]),
    ("empty run list", {"runs": []}, ["runs is []", "1 to 10000 runs"]),
    ("no run list", {"description": "x"}, ["lacks \"runs\""]),
    ("args a string", {"runs": [run("a", "all -b 8")]}, ["runs[0].args is \"all -b 8\"", "list of 1 to 1000 strings"]),
    ("args empty", {"runs": [run("a", [])]}, ["runs[0].args is []"]),
    ("args numbers", {"runs": [run("a", ["all", "-b", 8])]}, ["runs[0].args[2] is 8"]),
    ("--json given", {"runs": [run("a", ["all", "--json", "x.json"])]}, ["runs[0].args[1]", "drop --json"]),
    ("unknown key", {"runs": [dict(run("a", ["all"]), rank=2)]}, ["runs[0]: unknown key \"rank\""]),
    ("duplicate key", '{"runs": [], "runs": [{"name": "a", "ranks": 1, "args": ["all"]}]}', ["\"runs\" appears twice"]),
    ("NaN", '{"runs": [{"name": "a", "ranks": NaN, "args": ["all"]}]}', ["NaN is not a JSON number"]),
    ("not JSON", '{"runs": [', ["not valid JSON", "line 1"]),
    ("not an object", "[]", ["the top level is []", "must be an object"]),
]


def case_bad_files(ctx):
    for what, document, needles in BAD:
        result = ctx.sweep(document)
        lines = result.stderr.splitlines()
        check(result.returncode == 2, f"{what}: exit {result.returncode}: {result.stderr}")
        check(len(lines) == 1 and lines[0].startswith("error: sweep file ") and all(n in lines[0] for n in needles),
              f"{what}: want one line with {needles}: {result.stderr!r}")
        check(not os.path.exists(ctx.results) and not result.stdout, f"{what}: something ran or a folder was made")
        print(f"{what}: {lines[0]}")
    result = ctx.sweep({"runs": [run("a", ["all"])]}, run_id="../escape")
    check(result.returncode == 2 and "PARBENCH_RUN_ID" in result.stderr, f"run id: {result.stderr}")
    print(f"{len(BAD)} bad sweep files and a bad run id refused before anything ran")


def recorded(ctx, run_id, name):
    with open(os.path.join(ctx.results, run_id, f"{name}.json"), "rb") as recording:
        fields = recording.read().split(b"\0")
    return [field.decode("utf-8") for field in fields[:-1]]


def case_arguments(ctx):
    hostile = ["all", "two words", "it's \"quoted\"", "*", "$(touch pwned)", "", "--flag=a b", "ünïcode", "-"]
    result = ctx.sweep({"description": "arguments", "runs": [run("hostile-np1", hostile), run("np2", ["x"], ranks=2),
                                                             run("fails", ["x", "--exit", "3"]),
                                                             run("json-only", ["nocsv", "a"]),
                                                             run("no-report", ["noreport", "b"])]})
    check(result.returncode != 0, f"a failing run must fail the sweep: {result.stdout}{result.stderr}")
    check("sweep: fails failed with status 3" in result.stderr, result.stderr)
    folder = os.path.join(ctx.results, "test")
    got = recorded(ctx, "test", "hostile-np1")
    want = hostile + ["--json", os.path.join(folder, "hostile-np1.json"), "--csv", os.path.join(folder, "hostile-np1.csv")]
    check(got == want, f"arguments changed on the way: {got} != {want}")
    check(recorded(ctx, "test", "np2")[0] == "x", "the 2-rank run ran")
    check(not os.path.exists(os.path.join(ROOT, "pwned")) and not os.path.exists("pwned"), "an argument was run")
    # Issue 32: sweep.sh gave every run --csv, so a train, plan or pairs run (no --csv) always failed;
    # it now passes the report flags the run's command has.
    check(recorded(ctx, "test", "json-only") == ["nocsv", "a", "--json", os.path.join(folder, "json-only.json")],
          f"a command without --csv: {recorded(ctx, 'test', 'json-only')}")
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    with open(MANIFEST_SCHEMA) as schema:
        jsonschema.validate(manifest, json.load(schema))
    statuses = {r["name"]: r["exit_status"] for r in manifest["runs"]}
    check(statuses == {"hostile-np1": 0, "np2": 0, "fails": 3, "json-only": 0, "no-report": 0},
          f"manifest statuses {statuses}")
    by_name = {r["name"]: r for r in manifest["runs"]}
    check(by_name["hostile-np1"]["args"] == hostile and by_name["np2"]["ranks"] == 2, f"manifest runs {by_name}")
    check(by_name["json-only"]["reports"] == ["json-only.json"] and by_name["no-report"]["reports"] == [],
          f"manifest reports {by_name}")
    print(f"{len(hostile)} hostile arguments arrived whole at 1 rank; 2 ranks ran; report flags as each command has "
          f"them; the manifest (valid against its schema) says {statuses}")


CASES = {name[len("case_"):]: function for name, function in globals().items() if name.startswith("case_")}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(f"usage: sweep_suite.py {{{','.join(sorted(CASES))}}}", file=sys.stderr)
        return 2
    ctx = Context()
    try:
        CASES[sys.argv[1]](ctx)
    except AssertionError as error:
        print(f"FAILED {sys.argv[1]}: {error}", file=sys.stderr)
        return 1
    finally:
        ctx.close()
    print(f"passed {sys.argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
