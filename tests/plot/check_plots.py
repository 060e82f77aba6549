#!/usr/bin/env python3
"""Renders every kind of scripts/plot/plot.py from reports this test produces (two collective
runs to overlay, the second of two sweeps (-N 2), one pipeline training run) and checks the
image files."""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, timeout=240, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{result.stdout}\n{result.stderr}")
    return result


def main():
    parser = argparse.ArgumentParser()
    for name in ("--plot-python", "--plot", "--parbench", "--mpiexec", "--model"):
        parser.add_argument(name, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="parbench-plot-") as tmp:
        check_every_kind(args, tmp)


def check_every_kind(args, tmp):
    mpiexec = args.mpiexec.split()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    a, b, train = (os.path.join(tmp, name) for name in ("clusterA.json", "clusterB.json", "train.json"))
    run(mpiexec + ["-np", "2", args.parbench, "all", "-b", "8", "-e", "64K", "-f", "32", "--iters", "3", "--json", a],
        env=env)
    run(mpiexec + ["-np", "2", args.parbench, "allreduce", "-b", "8", "-e", "64K", "-f", "32", "--iters", "3",
                   "--aggregate", "rank-mean", "--inject-straggler", "1", "-N", "2", "--json", b], env=env)
    run(mpiexec + ["-np", "2", args.parbench, "train", "--model", args.model, "--pp", "2", "--microbatches", "4",
                   "--steps", "1", "--warmup", "0", "--json", train], env=env)

    out = os.path.join(tmp, "png")
    listed = run([args.plot_python, args.plot, a, b, train, "--out", out]).stdout.split()
    kinds = ("busbw", "latency", "spread", "ledger", "bubble")
    expected = [os.path.join(out, f"{kind}.png") for kind in kinds]
    if listed != expected:
        sys.exit(f"FAILED: plot.py wrote {listed}, want {expected}")
    for path in expected:
        with open(path, "rb") as image:
            header = image.read(24)
        if header[:8] != b"\x89PNG\r\n\x1a\n" or os.path.getsize(path) < 5000:
            sys.exit(f"FAILED: {path} is not a drawn PNG ({os.path.getsize(path)} bytes)")
        # A slide's width (the IHDR chunk's first field), whatever the number of panels.
        width = int.from_bytes(header[16:20], "big")
        if width != 1600:
            sys.exit(f"FAILED: {path} is {width} pixels wide, not 1600")
    svg = run([args.plot_python, args.plot, a, "--kind", "busbw", "--kind", "spread", "--point", "allreduce:8",
               "--format", "svg", "--out", os.path.join(tmp, "svg")]).stdout.split()
    for path in svg:
        text = open(path).read()
        if not path.endswith(".svg") or "<svg" not in text or "allreduce" not in text:
            sys.exit(f"FAILED: {path} is not an SVG of the allreduce point")
    # Asking for a kind the reports cannot give is an error, not an empty picture.
    result = subprocess.run([args.plot_python, args.plot, a, "--kind", "bubble", "--out", tmp], capture_output=True,
                            text=True)
    if result.returncode == 0 or "nothing to plot" not in result.stderr:
        sys.exit(f"FAILED: bubble from a collective report: {result.returncode} {result.stderr}")
    # An interpreter without matplotlib runs the script again under one that has it (scripts/plot/plot_env.py);
    # the run again, should it lack it too, ends in one line naming the fix (no loop).
    if importlib.util.find_spec("matplotlib") is None:
        again = dict(os.environ, PARBENCH_PLOT_RERUN="1")
        result = subprocess.run([sys.executable, args.plot, a, "--out", tmp], capture_output=True, text=True, env=again)
        if result.returncode == 0 or "python3-matplotlib" not in result.stderr or sys.executable not in result.stderr:
            sys.exit(f"FAILED: missing matplotlib message: {result.stderr}")
    print("passed: every kind rendered")


if __name__ == "__main__":
    main()
