#!/usr/bin/env python3
"""parbench's allreduce figures beside a plain MPI_Allreduce loop timed the same way
(src/baseline/plain_allreduce.cpp), alternating the two runs ROUNDS times so drift on
a shared machine hits both alike; each figure is the median over rounds of each run's
median. Also the harness overhead at 8 bytes: parbench time / plain loop time.

    scripts/bench/bench_harness.py [--ranks 2 4] [--sizes 8 1M 64M] [--rounds 5]
Run scripts/setup.sh first (the build lands in build/).
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def to_bytes(text):
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def mpirun(ranks):
    command = ["mpirun", "-np", str(ranks), "-x", "OPENBLAS_NUM_THREADS=1"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    if ranks > os.cpu_count():
        command.append("--oversubscribe")
    return command


def parbench_median(ranks, size, iters):
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        subprocess.run(mpirun(ranks) + [os.path.join(ROOT, "build", "parbench"), "allreduce", "--size", str(size),
                                        "--iters", str(iters), "--json", report.name],
                       check=True, capture_output=True)
        point = json.load(open(report.name))["results"][0]
        return point["time_us"]["median"], point["busbw_gbps"]


def plain_median(ranks, size, iters):
    out = subprocess.run(mpirun(ranks) + [os.path.join(ROOT, "build", "plain-allreduce"), str(size), "5", str(iters)],
                         check=True, capture_output=True, text=True).stdout
    point = json.loads(out)
    return point["median_us"], point["busbw_gbps"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--sizes", nargs="+", default=["8", "1M", "64M"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    print(f"{'ranks':>5} {'size':>9} {'parbench us':>12} {'plain us':>10} {'parbench busbw':>15} "
          f"{'plain busbw':>12} {'time ratio':>11}")
    for ranks in args.ranks:
        for size_text in args.sizes:
            size = to_bytes(size_text)
            ours, theirs = [], []
            for _ in range(args.rounds):
                ours.append(parbench_median(ranks, size, args.iters))
                theirs.append(plain_median(ranks, size, args.iters))
            our_us = statistics.median(t for t, _ in ours)
            plain_us = statistics.median(t for t, _ in theirs)
            our_bw = statistics.median(b for _, b in ours)
            plain_bw = statistics.median(b for _, b in theirs)
            print(f"{ranks:>5} {size_text:>9} {our_us:>12.2f} {plain_us:>10.2f} {our_bw:>15.3f} {plain_bw:>12.3f} "
                  f"{our_us / plain_us:>11.3f}")


if __name__ == "__main__":
    main()
