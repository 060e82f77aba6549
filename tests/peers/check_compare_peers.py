#!/usr/bin/env python3
"""scripts/bench/compare_peers.py, checked without the peers' real binaries.

1. Tabulation: every committed side-by-side (results/2026-12-01-imb-osu-peers/peers-*.json, old and new
   formats) is tabulated again under each statistic; every ratio must be the statistic of
   parbench's processes over the statistic of the peer's, computed here from the raw rounds.
2. --drift on a committed run: a verdict for every point against each peer, whose busbw ratio
   is the ratio of the processes' median busbw (compare's figure for a column of runs), and
   exit status 1 exactly when one says DRIFT.
3. A measuring run with stand-ins for IMB-MPI1 and the OSU tests (scripts that print each
   tool's table rows with figures this test chose and logged) beside the real parbench:
   the script must read the stand-ins' figures back exactly, get a figure from parbench at
   every point, and compute its ratios from those.

    check_compare_peers.py --script scripts/bench/compare_peers.py --parbench build/parbench \\
        --results results/2026-12-01-imb-osu-peers
"""
import argparse
import glob
import json
import os
import stat
import statistics
import subprocess
import sys
import tempfile

COLLECTIVES = ["allreduce", "allgather", "alltoall", "broadcast", "reduce"]
OSU_BINARIES = ["osu_allreduce", "osu_allgather", "osu_alltoall", "osu_bcast", "osu_reduce"]
STATISTICS = {
    "quartile": lambda v: statistics.quantiles(v, n=4, method="inclusive")[0],
    "best": min,
    "median": statistics.median,
}


def fail(message):
    sys.exit(f"FAIL: {message}")


def check_ratios(report, statistic, source):
    """Every ratio of a --json output against the raw rounds it carries."""
    pick = STATISTICS[statistic]
    raw = report["raw"]
    if len(raw) != report["rounds"]:
        fail(f"{source}: {len(raw)} rounds of figures, the report says {report['rounds']}")
    checked = 0
    for row in report["rows"]:
        key = f"{row['collective']} {row['bytes']}"
        for field, value in row.items():
            if not field.startswith("ratio_"):
                continue
            mine, peer = field[len("ratio_"):].split("_to_")
            expected = pick([r[key][mine] for r in raw]) / pick([r[key][peer] for r in raw])
            if abs(value - expected) > 1e-9 * expected:
                fail(f"{source} --statistic {statistic}: {key} {field} = {value}, the raw rounds give {expected}")
            checked += 1
        for statistic_name in STATISTICS:
            for field in ("imb_t_avg", "osu_avg", "parbench_rank-mean"):
                expected = STATISTICS[statistic_name]([r[key][field] for r in raw])
                if abs(row[f"{field}_{statistic_name}_us"] - expected) > 1e-9 * expected:
                    fail(f"{source}: {key} {field}_{statistic_name}_us is not the {statistic_name} of the rounds")
    if checked == 0:
        fail(f"{source}: no ratio in the output")
    return checked


def run(command, what):
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        fail(f"{what} exited with {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def check_tabulation(script, results):
    files = sorted(glob.glob(os.path.join(results, "peers-*.json")))
    if not files:
        fail(f"no peers-*.json under {results}")
    with tempfile.TemporaryDirectory(prefix="peers-tab-") as work:
        for path in files:
            for statistic in STATISTICS:
                out = os.path.join(work, "again.json")
                result = run([sys.executable, script, "--from-json", path, "--statistic", statistic, "--json", out,
                              "--markdown"], f"--from-json {path}")
                report = json.load(open(out))
                checked = check_ratios(report, statistic, os.path.basename(path))
                table_rows = [line for line in result.stdout.splitlines() if line.startswith("| ") and
                              line.split("|")[1].strip() in COLLECTIVES]
                if len(table_rows) != len(report["rows"]):
                    fail(f"{path}: {len(table_rows)} table rows printed for {len(report['rows'])} points")
                # The control: the peers against each other, in the table and the JSON.
                if not result.stdout.startswith("| collective") or "| IMB/OSU |" not in result.stdout.splitlines()[0]:
                    fail(f"{path}: no IMB/OSU column in the table header")
                if any("ratio_imb_t_avg_to_osu_avg" not in row for row in report["rows"]):
                    fail(f"{path}: a row has no IMB/OSU ratio")
            print(f"tabulated {os.path.basename(path)} under {len(STATISTICS)} statistics: {checked} ratios each")


def check_resampling(script):
    """--resample on made-up rounds: every process of a tool reads the same, parbench twice the
    peers at allreduce 8 B only, so that point is beyond 15 % in every resample and no other
    point in any."""
    points = [f"{name} {size}" for name in COLLECTIVES for size in (8, 1024)]
    def figures(point):
        mine = 2.0 if point == "allreduce 8" else 1.0
        return {"parbench_rank-mean": mine, "parbench_rank-max": mine, "imb_t_avg": 1.0, "imb_t_max": 1.0,
                "osu_avg": 1.0, "osu_max": 1.0}
    made_up = {"np": 2, "rounds": 4, "sizes": [8, 1024], "parbench_flags": [], "imb_buffer_offsets": {}, "rows": [],
               "raw": [{point: figures(point) for point in points} for _ in range(4)]}
    with tempfile.TemporaryDirectory(prefix="peers-resample-") as work:
        source, out = os.path.join(work, "made-up.json"), os.path.join(work, "again.json")
        json.dump(made_up, open(source, "w"))
        result = run([sys.executable, script, "--from-json", source, "--resample", "40", "--json", out],
                     "--resample")
        chances = json.load(open(out))["resampled_miss_chance"]
        for pair in ("parbench_rank-mean_to_osu_avg", "parbench_rank-mean_to_imb_t_avg", "imb_t_avg_to_osu_avg"):
            if set(chances.get(pair, {})) != set(points):
                fail(f"--resample: no chance per point for {pair}: {chances.get(pair)}")
            for point, chance in chances[pair].items():
                expected = 1.0 if point == "allreduce 8" and pair.startswith("parbench") else 0.0
                if chance != expected:
                    fail(f"--resample: {pair} {point} beyond 15 % in {chance} of resamples, expected {expected}")
        if "1.0 points beyond 15 % per run expected; beyond in 90 % of resamples: allreduce 8 B" not in result.stderr:
            fail(f"--resample: the summary line is not as expected:\n{result.stderr}")
    print("--resample: a made-up systematic miss is found in every resample, no noise where there is none")


def check_drift(script, results, parbench):
    path = os.path.join(results, "peers-2ranks-30rounds-advance-idle.json")
    with tempfile.TemporaryDirectory(prefix="peers-drift-") as work:
        out = os.path.join(work, "again.json")
        result = subprocess.run([sys.executable, script, "--from-json", path, "--statistic", "median", "--drift",
                                 "--parbench", parbench, "--json", out], capture_output=True, text=True, timeout=600)
        if result.returncode not in (0, 1) or not os.path.exists(out):
            fail(f"--drift exited with {result.returncode}:\n{result.stderr}")
        report = json.load(open(out))
        rows = {(row["collective"], row["bytes"]): row for row in report["rows"]}
        verdicts = report["drift"]
        if len(verdicts) != 2 * len(rows):
            fail(f"--drift: {len(verdicts)} verdicts for {len(rows)} points and 2 peers")
        # compare's busbw of a column of runs is the median of the runs' busbw (1 / time here).
        busbw = lambda point, field: statistics.median(1.0 / r[point][field] for r in report["raw"])
        for v in verdicts:
            field = {"IMB": "imb_t_avg", "OSU": "osu_avg"}[v["peer"]]
            point = f"{v['collective']} {v['bytes']}"
            expected = busbw(point, "parbench_rank-mean") / busbw(point, field)
            if abs(v["ratio"] - expected) > 0.0051:  # compare prints two decimals
                fail(f"--drift: {v['collective']} {v['bytes']} B against {v['peer']}: busbw ratio {v['ratio']}, "
                     f"the processes' median busbw give {expected:.4f}")
        drifted = sum(v["drift"] for v in verdicts)
        if result.returncode != (1 if drifted else 0) or result.stderr.count("DRIFT") != drifted:
            fail(f"--drift: {drifted} verdicts drift, exit {result.returncode}, {result.stderr.count('DRIFT')} printed")
    print(f"--drift on {os.path.basename(path)}: {len(verdicts)} verdicts, {drifted} drift, each ratio its median busbw's")


STAND_IN = """#!{python}
# A stand-in for {tool}: rank 0 prints the row the tool would, with the next figure of
# this test's list, and logs what it printed.
import os, sys
if os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")) != "0":
    sys.exit(0)
state = os.path.join({folder!r}, "printed.log")
count = sum(1 for _ in open(state)) if os.path.exists(state) else 0
figure = 0.40 + 0.01 * (count % 7)
{body}
with open(state, "a") as log:
    log.write(f"{{name}} {{size}} {{figure:.2f}}\\n")
"""

IMB_BODY = """name = sys.argv[1].lower()
size = int(open(sys.argv[sys.argv.index("-msglen") + 1]).read().split()[0])
print("#bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]")
print(f"{size} 1000 {figure - 0.1:.2f} {figure + 0.1:.2f} {figure:.2f}")"""

OSU_BODY = """name = os.path.basename(sys.argv[0])
size = int(sys.argv[sys.argv.index("-m") + 1].split(":")[0])
print("# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations")
print(f"{size} {figure:.2f} {figure - 0.1:.2f} {figure + 0.1:.2f} 1000")"""


def write_stand_in(path, tool, folder, body):
    with open(path, "w") as out:
        out.write(STAND_IN.format(python=sys.executable, tool=tool, folder=folder, body=body))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def check_measuring_run(script, parbench):
    with tempfile.TemporaryDirectory(prefix="peers-run-") as work:
        imb_dir, osu_dir = os.path.join(work, "imb"), os.path.join(work, "osu")
        os.makedirs(imb_dir)
        os.makedirs(osu_dir)
        imb = os.path.join(imb_dir, "IMB-MPI1")
        write_stand_in(imb, "IMB-MPI1", imb_dir, IMB_BODY)
        for binary in OSU_BINARIES:
            write_stand_in(os.path.join(osu_dir, binary), binary, osu_dir, OSU_BODY)
        out = os.path.join(work, "peers.json")
        rounds = 3
        run([sys.executable, script, "--imb", imb, "--osu", osu_dir, "--parbench", parbench, "--sizes", "8",
             "--rounds", str(rounds), "--no-imb-placement", "--json", out], "compare_peers.py with stand-ins")
        report = json.load(open(out))
        # The name each stand-in logs: IMB's benchmark in lower case, OSU's binary.
        imb_name = lambda collective: "bcast" if collective == "broadcast" else collective
        osu_name = lambda collective: "osu_" + imb_name(collective)
        for folder, field, name_of in ((imb_dir, "imb_t_avg", imb_name), (osu_dir, "osu_avg", osu_name)):
            printed = [line.split() for line in open(os.path.join(folder, "printed.log"))]
            if len(printed) != rounds * len(COLLECTIVES):
                fail(f"{folder}: the stand-in ran {len(printed)} times, expected {rounds * len(COLLECTIVES)}")
            for collective in COLLECTIVES:
                read = [r[f"{collective} 8"][field] for r in report["raw"]]
                logged = [float(f[2]) for f in printed if f[0] == name_of(collective) and f[1] == "8"]
                if read != logged:
                    fail(f"{collective} {field}: the script read {read}, the stand-in printed {logged}")
        for r in report["raw"]:
            for collective in COLLECTIVES:
                value = r[f"{collective} 8"]["parbench_rank-mean"]
                if not 0 < value < 1e4:
                    fail(f"parbench's {collective} 8 B figure {value} us is not a time")
        checked = check_ratios(report, "quartile", "the stand-in run")
        print(f"a measuring run with stand-ins read every peer figure back and checked {checked} ratios")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--script", required=True)
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--results", required=True)
    args = parser.parse_args()
    check_tabulation(args.script, args.results)
    check_resampling(args.script)
    check_drift(args.script, args.results, args.parbench)
    check_measuring_run(args.script, args.parbench)
    print("compare_peers.py: OK")


if __name__ == "__main__":
    main()
