#!/usr/bin/env python3
"""The peer-drift guard: parbench against two peers that time a collective the same way, at a
few points, failing only where parbench's ratio to a peer is further from 1 than the peers are
from each other, by more than the noise.

A change made for one purpose can move the collective figures without anyone noticing (buffers
on huge pages made parbench's 1 MiB-per-peer alltoall read 0.41x IMB's time). Two peers of one
method disagree too on a shared machine, and each process of any tool can draw a fast or a slow
mode for its whole life, so a fixed tolerance is either blind or flaky. Here each tool runs once
per round and point (the order rotating), each process is one run of its tool, and
`parbench compare`'s between-run noise model (src/report/point_runs.hpp, the one the regression
gate uses: a t interval over the runs' log times, a run slower than twice its column's median
left out as interrupted, 95 % for all of a comparison's intervals together) gives the interval
of parbench's busbw ratio to each peer and of the other peer's (the control).
A point drifts from peer X when every ratio in parbench's interval lies further from 1 than
every ratio in the control's interval reaches, and further than 25 %: two loops as alike as the
plain IMB-style and OSU-style ones agree more tightly than any two real tools, while parbench's
own timing reads up to a fifth faster at 8 B (its busbw 0.94-1.22x the plain loops' in eight
runs of this guard on 2026-12-04, 0.92-1.22x real IMB's and OSU's the same day), which is how it
times, not a drift; the drifts this exists for are larger (2.4x: huge pages).

    min |ln r| over parbench's interval  >  max(max |ln r| over the control's interval, ln 1.25)

    scripts/bench/peer_drift.py --plain build/plain-collectives [--parbench build/parbench] [--np 2]
        [--rounds 4] [--points allreduce:8,alltoall:1048576,...] [--parbench-flags "..."] [--json FILE]

The peers are the project's plain loops written IMB-MPI1's and OSU's way
(src/baseline/plain_collectives.cpp): CI reaches only Debian and PyPI, which package neither
IMB nor OSU. scripts/bench/compare_peers.py --drift applies the same judgement to the real IMB-MPI1
and OSU. Sizes are the peers' convention (alltoall: each per-peer block); parbench runs with the
flags that reproduce their method (docs/reproducing.md). Exit status: 0 no drift, 1 drift, 2 a
tool failed, a point could not be judged (no interval: the guard never passes on nothing), or
bad usage.
"""
import argparse
import csv
import io
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

TOLERANCE = 0.25  # a ratio within 25 % of 1 is agreement, whatever the control
DEFAULT_POINTS = [(name, size) for name in ("allreduce", "alltoall", "reduce") for size in (8, 1 << 20)]
SMALL = 8192  # OSU's iteration switch: 200 warm-up + 1000 timed at or below, 10 + 100 above
# The flags that reproduce IMB-MPI1's and OSU's method (docs/reproducing.md).
PARBENCH_METHOD = ["--timing", "per-iter", "--aggregate", "rank-mean", "--placement", "out", "--mpi-threads", "single"]
PER_PEER_BLOCK = {"alltoall", "allgather"}  # the peers' size is per rank; parbench's is the whole buffer


def thp_setting(root="/sys/kernel/mm/transparent_hugepage"):
    """{"enabled": ..., "defrag": ...}: the bracketed words of the kernel's THP setting, as
    parbench reads it (src/device/host_pages.cpp), for the record of a measurement."""
    def chosen(path):
        try:
            line = open(path).readline()
        except OSError:
            return None
        return line[line.index("[") + 1:line.index("]")] if "[" in line and "]" in line else None
    enabled = chosen(f"{root}/hugepages-2048kB/enabled")
    if enabled in (None, "inherit"):
        enabled = chosen(f"{root}/enabled")
    return {"enabled": enabled or "unavailable", "defrag": chosen(f"{root}/defrag") or "unavailable"}


def parse_points(text):
    points = []
    for item in text.split(","):
        name, _, size = item.partition(":")
        if not size.isdigit():
            sys.exit(f"error: --points '{item}': give COLLECTIVE:BYTES, e.g. alltoall:1048576")
        points.append((name, int(size)))
    return points


def mpirun(np, args, what):
    command = ["mpirun", "-np", str(np)] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    result = subprocess.run(command + args, capture_output=True, text=True, env=env, timeout=300)
    if result.returncode != 0:
        print(f"error: {what} failed ({result.returncode}):\n{result.stdout[-2000:]}{result.stderr[-2000:]}",
              file=sys.stderr)
        sys.exit(2)
    return result.stdout


def run_parbench(parbench, np, point, flags, workdir):
    """(t_avg in us, the pages its buffers got) of one parbench process at one point."""
    name, size = point
    scale = np if name in PER_PEER_BLOCK else 1
    warmup, iters = ("200", "1000") if size <= SMALL else ("10", "100")
    report = os.path.join(workdir, "parbench-run.json")
    mpirun(np, [parbench, name, "--size", str(size * scale), "--warmup", warmup, "--iters", iters, *PARBENCH_METHOD,
                *flags, "--quiet", "--json", report], f"parbench {name} {size * scale} B")
    document = json.load(open(report))
    pages = document["environment"].get("buffer_pages", {}).get("obtained", "unrecorded")
    return document["results"][0]["reported_time_us"], pages


def run_plain(plain, np, style, points):
    """{point: t_avg in us} of one plain-collectives process at every point, the small sizes
    first, as IMB and OSU run them: a 1 MiB point before an 8 B one in the same process made the
    8 B one read up to 200x slower here, now and then."""
    ordered = sorted(points, key=lambda point: (point[1], point[0]))
    text = mpirun(np, [plain, "--style", style, *[f"{name}:{size}" for name, size in ordered]],
                  f"plain-collectives --style {style}")
    figures = {}
    for line in text.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            figures[(row["collective"], row["bytes"])] = row["t_avg_us"]
    missing = [p for p in points if p not in figures]
    if missing:
        print(f"error: plain-collectives --style {style} printed no figure for {missing}:\n{text}", file=sys.stderr)
        sys.exit(2)
    return figures


def measure(args, points, workdir):
    """{point: {tool: [us per round]}} and the pages parbench's buffers got; the order of the
    tools rotates with the round, so a slow drift of the machine touches each alike."""
    tools = ["parbench", "IMB-style", "OSU-style"]
    figures = {point: {tool: [] for tool in tools} for point in points}
    pages = set()
    for r in range(args.rounds):
        shift = r % len(tools)
        for tool in tools[shift:] + tools[:shift]:
            if tool == "parbench":
                for point in points:
                    time_us, obtained = run_parbench(args.parbench, args.np, point, args.parbench_flags.split(), workdir)
                    figures[point]["parbench"].append(time_us)
                    pages.add(obtained)
            else:
                style = "imb" if tool == "IMB-style" else "osu"
                for point, time_us in run_plain(args.plain, args.np, style, points).items():
                    figures[point][tool].append(time_us)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    return figures, sorted(pages)


def report_of(tool, figures, np, run):
    """A parbench.report/v1 document of one process of `tool`: its figure at every point, as one
    run. compare takes a tool's processes as the runs of one column, so its between-run noise
    model judges them (this VM's modes live in processes)."""
    results = []
    for (name, size), by_tool in figures.items():
        time_us = by_tool[tool][run]
        results.append({"collective": name, "bytes": size, "dtype": "float32", "inplace": False,
                        "busbw_gbps": size / time_us / 1e3, "time_us": {"median": time_us}, "samples_us": [time_us]})
    return {"schema": "parbench.report/v1", "command": "peer-drift " + tool, "status": "complete",
            "environment": {"world_size": np, "backend": "mpi", "hosts": ["this host"]}, "config": {"dtype": "float32"},
            "results": results}


def interval_of(cell):
    """(low, high) of compare's "within 0.91-1.07x (runs 4+4)" / "beyond 0.48-0.52x (runs 4+4, 1
    interrupted left out)"; None for "no runs" or anything else that is not an interval between
    runs. compare prints two decimals, so "0.00" stands for anything below 0.005 (a tool made
    hundreds of times slower): taken as 0.005, which keeps it far from 1."""
    words = cell.split()
    if len(words) < 3 or words[0] not in ("within", "beyond") or not words[2].startswith("(runs"):
        return None
    low, high = (max(float(v), 0.005) for v in words[1].rstrip("x").split("-"))
    return low, high


def compare_intervals(parbench, reference, others, figures, np, workdir):
    """{point: {tool: (ratio, (low, high) or None)}}: each other tool's busbw ratio to
    `reference` and its interval, from `parbench compare --csv reference other...`, each tool's
    processes given as the runs of its column ("1/tool.json,2/tool.json,...")."""
    columns = []
    for tool in [reference] + others:
        paths = []
        for run in range(len(next(iter(figures.values()))[tool])):
            folder = os.path.join(workdir, str(run + 1))
            os.makedirs(folder, exist_ok=True)
            paths.append(os.path.join(folder, f"{tool}.json"))
            json.dump(report_of(tool, figures, np, run), open(paths[-1], "w"))
        columns.append(",".join(paths))
    result = subprocess.run([parbench, "compare", "--csv", *columns], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        print(f"error: parbench compare failed ({result.returncode}): {result.stderr}", file=sys.stderr)
        sys.exit(2)
    rows = list(csv.reader(io.StringIO(result.stdout)))
    header = rows[0]
    column = lambda tool, what: next(h for h in header if h.startswith(f"{tool}.json") and what in h)
    judged = {}
    for row in rows[1:]:
        if len(row) != len(header):
            continue  # compare's note on unshared points
        cells = dict(zip(header, row))
        point = (row[0], int(row[1]))
        judged[point] = {tool: (float(cells[column(tool, "busbw ratio")].rstrip("x")),
                                interval_of(cells[column(tool, "vs noise")])) for tool in others}
    if set(judged) != set(figures):
        print(f"error: parbench compare lined up {sorted(judged)}, not every point measured {sorted(figures)}:\n"
              f"{result.stdout}", file=sys.stderr)
        sys.exit(2)
    return judged


def distance_from_one(interval, nearest):
    """How far from 1 an interval lies in |ln r|: its nearest point (0 when it holds 1), or its
    furthest point."""
    low, high = interval
    if nearest:
        return 0.0 if low <= 1.0 <= high else min(abs(math.log(low)), abs(math.log(high)))
    return max(abs(math.log(low)), abs(math.log(high)))


def judge(parbench, figures, np, peers=("IMB-style", "OSU-style"), mine="parbench"):
    """Per point and peer: parbench's ratio and interval, the control's, and whether it drifts.
    Returns a list of dicts; where compare gave no interval (too few runs to tell), "interval"
    or "control_interval" is None and the point is not judged a drift: see unjudged()."""
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="peer-drift-compare-") as workdir:
        for reference in peers:
            other = next(p for p in peers if p != reference)
            judged = compare_intervals(parbench, reference, [other, mine], figures, np, workdir)
            for point in figures:
                ratio, interval = judged[point][mine]
                control_ratio, control = judged[point][other]
                allowed = max(distance_from_one(control, False), math.log(1.0 + TOLERANCE)) if control else None
                drift = interval is not None and allowed is not None and distance_from_one(interval, True) > allowed
                # The power of this verdict: an interval as wide as parbench's has, centred on a
                # ratio this far from 1, would have been judged a drift.
                caught = (math.exp(allowed + math.log(interval[1] / interval[0]) / 2)
                          if interval is not None and allowed is not None else None)
                verdicts.append({"collective": point[0], "bytes": point[1], "peer": reference,
                                 "ratio": ratio, "interval": interval, "control": other,
                                 "control_ratio": control_ratio, "control_interval": control, "drift": drift,
                                 "caught_beyond": caught})
    return verdicts


def unjudged(verdicts):
    """The verdicts that judged nothing (no interval for parbench or for the control)."""
    return [v for v in verdicts if v["interval"] is None or v["control_interval"] is None]


def print_verdicts(verdicts, out=sys.stdout):
    """One line per point and peer, busbw ratios (above 1: faster than the peer), and the drift
    the point could have caught: a ratio that far from 1, either way."""
    span = lambda i: f"{i[0]:.2f}-{i[1]:.2f}" if i else "no interval"
    for v in verdicts:
        caught = f"  (catches beyond {v['caught_beyond']:.2f}x)" if v.get("caught_beyond") else ""
        print(f"{v['collective']:>10} {v['bytes']:>8} B  parbench/{v['peer']} {v['ratio']:.2f} ({span(v['interval'])})"
              f"  {v['control']}/{v['peer']} {v['control_ratio']:.2f} ({span(v['control_interval'])})"
              f"  {'DRIFT' if v['drift'] else 'ok'}{caught}", file=out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plain", required=True, help="the plain-collectives binary (the peers)")
    parser.add_argument("--parbench", default="build/parbench")
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--points", help="COLLECTIVE:BYTES,... (default: allreduce, alltoall, reduce at 8 B and 1 MiB)")
    parser.add_argument("--parbench-flags", default="", help="more flags for every parbench run")
    parser.add_argument("--json", help="write every round's figures and the verdicts here")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be 2 or more: the noise is judged over the rounds' processes")
    points = parse_points(args.points) if args.points else DEFAULT_POINTS
    for path in (args.parbench, args.plain):
        if not os.access(path, os.X_OK):
            parser.error(f"{path} is not an executable; build it first (scripts/setup.sh)")
    with tempfile.TemporaryDirectory(prefix="peer-drift-") as workdir:
        figures, pages = measure(args, points, workdir)
    for point, by_tool in figures.items():
        print(f"# {point[0]} {point[1]} B, us per process: " +
              "; ".join(f"{tool} {' '.join(f'{t:.2f}' for t in times)}" for tool, times in by_tool.items()),
              file=sys.stderr)
    verdicts = judge(args.parbench, figures, args.np)
    thp = thp_setting()
    print(f"# busbw ratios to each peer and their intervals from parbench compare's between-run noise model over "
          f"{args.rounds} processes per tool (95 % for all of a comparison's together); THP {thp['enabled']} (defrag {thp['defrag']}), parbench's buffers on "
          f"{', '.join(pages)} pages")
    print_verdicts(verdicts)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"np": args.np, "rounds": args.rounds, "thp": thp, "parbench_pages": pages,
                       "parbench_flags": PARBENCH_METHOD + args.parbench_flags.split(), "verdicts": verdicts,
                       "figures": {f"{n} {s}": by_tool for (n, s), by_tool in figures.items()}}, out, indent=1)
    if unjudged(verdicts) or len(verdicts) != 2 * len(points):
        print(f"error: {len(unjudged(verdicts))} of {len(verdicts)} verdicts had no interval to judge by "
              f"(expected {2 * len(points)} judged): the guard does not pass on nothing", file=sys.stderr)
        return 2
    drifted = [v for v in verdicts if v["drift"]]
    if drifted:
        names = ", ".join(f"{v['collective']} {v['bytes']} B against {v['peer']}" for v in drifted)
        print(f"error: parbench drifted from its peers beyond their own disagreement and the noise: {names}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
