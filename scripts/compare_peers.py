#!/usr/bin/env python3
"""parbench side by side with the Intel MPI Benchmarks and the OSU micro-benchmarks.

Runs, in alternating rounds, parbench with the flags that reproduce each peer's method
(README "Reproducing other tools' numbers"), IMB-MPI1 and the OSU collective latency
tests, on the same ranks and sizes, and prints the median over rounds of every figure
with parbench's ratio to the peer. The peers are not part of parbench: build them
yourself from their public sources and point this script at the binaries.

    scripts/compare_peers.py --imb /path/IMB-MPI1 --osu /path/osu/mpi/collective \\
        [--parbench build/parbench] [--np 2] [--rounds 5] [--json out.json] [--markdown]

Sizes follow the peers' convention (IMB's #bytes, OSU's Size): the whole buffer for
allreduce, reduce and broadcast, each rank's contribution for allgather and each
per-peer block for alltoall. parbench's size is the full buffer (nccl-tests'
convention), so for those two the script asks parbench for np times the size.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

COLLECTIVES = {
    # parbench name: (IMB benchmark, OSU binary, parbench size = peer size x this (per rank count))
    "allreduce": ("Allreduce", "osu_allreduce", False),
    "allgather": ("Allgather", "osu_allgather", True),
    "alltoall": ("Alltoall", "osu_alltoall", True),
    "broadcast": ("Bcast", "osu_bcast", False),
    "reduce": ("Reduce", "osu_reduce", False),
}
DEFAULT_SIZES = [8, 1024, 65536, 1 << 20, 4 << 20]
SMALL = 8192  # OSU's iteration switch: 1000 iterations + 200 warm-up below, 100 + 10 above

# The parbench flags that reproduce IMB-MPI1's and OSU's method: each iteration timed
# alone between barriers, every rank's mean over iterations, then the mean (t_avg, OSU's
# average) or the max (t_max) over ranks; separate send and receive buffers.
PARBENCH_METHOD = ["--timing", "per-iter", "--aggregate", "rank-mean", "--placement", "out", "--mpi-threads", "single"]


def mpirun(args, np):
    base = ["mpirun", "--allow-run-as-root", "-np", str(np)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    result = subprocess.run(base + args, capture_output=True, text=True, env=env, timeout=900)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(args[:2])} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout


def run_parbench(parbench, np, sizes, workdir):
    """{(collective, peer size): {"rank-mean": us, "rank-max": us}} from one run per collective and size class."""
    figures = {}
    for name, (_, _, per_rank) in COLLECTIVES.items():
        scale = np if per_rank else 1
        for small in (True, False):
            chosen = [s for s in sizes if (s <= SMALL) == small]
            if not chosen:
                continue
            iters, warmup = ("1000", "200") if small else ("100", "10")
            report = os.path.join(workdir, f"{name}.json")
            for size in chosen:
                mpirun([parbench, name, "--size", str(size * scale), "--iters", iters, "--warmup", warmup,
                        *PARBENCH_METHOD, "--quiet", "--json", report], np)
                entry = json.load(open(report))["results"][0]
                figures[(name, size)] = {"rank-mean": entry["reported_time_us"],
                                         "rank-max": entry["aggregates_us"]["rank-max"]}
    return figures


def run_imb(imb, np, sizes, workdir):
    """One IMB-MPI1 process per collective and size, as parbench runs, with OSU's iteration
    counts (IMB's own policy would pick fewer repetitions for large sizes)."""
    figures = {}
    by_imb = {imb_name: name for name, (imb_name, _, _) in COLLECTIVES.items()}
    lengths = os.path.join(workdir, "imb-lengths.txt")
    for imb_name, name in by_imb.items():
        for size in sizes:
            iters = "1000" if size <= SMALL else "100"
            with open(lengths, "w") as out:
                out.write(f"{size}\n")
            text = mpirun([imb, imb_name, "-msglen", lengths, "-npmin", str(np), "-iter", iters, "-iter_policy", "off"],
                          np)
            for line in text.splitlines():
                fields = line.split()
                if len(fields) == 5 and fields[0].isdigit() and int(fields[0]) == size:
                    figures[(name, size)] = {"t_avg": float(fields[4]), "t_max": float(fields[3])}
    return figures


def run_osu(osu_dir, np, sizes):
    """One OSU process per collective and size (-m SIZE:SIZE), as parbench runs."""
    figures = {}
    for name, (_, binary, _) in COLLECTIVES.items():
        for size in sizes:
            text = mpirun([os.path.join(osu_dir, binary), "-f", "-m", f"{size}:{size}"], np)
            for line in text.splitlines():
                fields = line.split()
                if len(fields) >= 4 and fields[0].isdigit() and int(fields[0]) == size:
                    figures[(name, size)] = {"avg": float(fields[1]), "max": float(fields[3])}
    return figures


def median_over(rounds, key, field):
    values = [r[key][field] for r in rounds if key in r]
    return statistics.median(values) if values else None


def measure_rounds(args, sizes, workdir):
    rounds = {"parbench": [], "imb": [], "osu": []}
    for r in range(args.rounds):
        # Alternate the order, so slow drifts of the machine touch every tool alike.
        order = ["parbench", "imb", "osu"]
        order = order[r % 3:] + order[:r % 3]
        for tool in order:
            if tool == "parbench":
                rounds[tool].append(run_parbench(args.parbench, args.np, sizes, workdir))
            elif tool == "imb":
                rounds[tool].append(run_imb(args.imb, args.np, sizes, workdir))
            else:
                rounds[tool].append(run_osu(args.osu, args.np, sizes))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    return rounds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--imb", required=True, help="the IMB-MPI1 binary you built")
    parser.add_argument("--osu", required=True, help="the folder holding osu_allreduce, osu_bcast, ...")
    parser.add_argument("--parbench", default="build/parbench")
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="bytes, peers' convention")
    parser.add_argument("--json", help="write every round's figures and the medians here")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    for path in (args.imb, args.parbench, os.path.join(args.osu, "osu_allreduce")):
        if not os.access(path, os.X_OK):
            sys.exit(f"error: {path} is not an executable; build it first (see the script's help)")

    with tempfile.TemporaryDirectory(prefix="parbench-peers-") as workdir:
        rounds = measure_rounds(args, sizes, workdir)
    rows = []
    for name in COLLECTIVES:
        for size in sizes:
            key = (name, size)
            row = {
                "collective": name, "bytes": size,
                "parbench_rank_mean_us": median_over(rounds["parbench"], key, "rank-mean"),
                "parbench_rank_max_us": median_over(rounds["parbench"], key, "rank-max"),
                "imb_t_avg_us": median_over(rounds["imb"], key, "t_avg"),
                "imb_t_max_us": median_over(rounds["imb"], key, "t_max"),
                "osu_avg_us": median_over(rounds["osu"], key, "avg"),
            }
            rows.append(row)

    def ratio(a, b):
        return a / b if a is not None and b else None

    header = ["collective", "size (B)", "IMB t_avg", "parbench rank-mean", "ratio", "IMB t_max", "parbench rank-max",
              "ratio", "OSU avg", "ratio"]
    lines = []
    for row in rows:
        cells = [row["collective"], str(row["bytes"])]
        for peer, mine in (("imb_t_avg_us", "parbench_rank_mean_us"), ("imb_t_max_us", "parbench_rank_max_us"),
                           ("osu_avg_us", "parbench_rank_mean_us")):
            if peer != "osu_avg_us":
                cells += [fmt(row[peer]), fmt(row[mine])]
            else:
                cells += [fmt(row[peer])]
            value = ratio(row[mine], row[peer])
            row[f"ratio_{peer}"] = value
            cells.append(f"{value:.2f}" if value is not None else "-")
        lines.append(cells)
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + " --- |" * len(header))
        for cells in lines:
            print("| " + " | ".join(cells) + " |")
    else:
        widths = [max(len(h), *(len(c[i]) for c in lines)) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for cells in lines:
            print("  ".join(c.rjust(w) for c, w in zip(cells, widths)))
    worst = max(abs(v - 1) for row in rows for k, v in row.items() if k.startswith("ratio_") and v is not None)
    print(f"# times in us, medians over {args.rounds} alternating rounds at {args.np} ranks; "
          f"largest deviation from the peer {100 * worst:.0f}%", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"np": args.np, "rounds": args.rounds, "sizes": sizes, "parbench_flags": PARBENCH_METHOD,
                       "rows": rows,
                       "raw": {tool: [{f"{k[0]} {k[1]}": v for k, v in r.items()} for r in rs]
                               for tool, rs in rounds.items()}}, out, indent=1)


def fmt(value):
    return f"{value:.2f}" if value is not None else "-"


if __name__ == "__main__":
    main()
