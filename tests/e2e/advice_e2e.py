#!/usr/bin/env python3
"""Advice that points the right way, as a user meets it (issue 36): `info` run alone names no
PMI launcher, `--groups cross-host` on one host asks for more hosts, `pairs` with more ranks
than cores warns and its report carries the CPU shares and diagnosis.

Usage: advice_e2e.py --parbench BIN --mpiexec MPIEXEC --schema SCHEMA
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import jsonschema


def check(condition, message):
    if not condition:
        sys.exit(f"FAIL: {message}")


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--parbench", "--mpiexec", "--schema"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="parbench-advice-")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")

    def run(ranks, *arguments):
        command = args.mpiexec.split() + ["-np", str(ranks)] if ranks else []
        return subprocess.run(command + [args.parbench, *arguments], capture_output=True, text=True, timeout=120,
                              env=env, cwd=tmp)

    # info alone is an MPI singleton: no launcher, whatever Open MPI's singleton start sets.
    alone = run(0, "info", "--json", "alone.json")
    check(alone.returncode == 0, alone.stderr)
    launcher = json.load(open(os.path.join(tmp, "alone.json")))["launcher"]
    check(launcher == "none (singleton)" and "PMI" not in alone.stdout, f"info alone: launcher {launcher!r}")
    under = run(1, "info", "--json", "mpirun.json")
    check(json.load(open(os.path.join(tmp, "mpirun.json")))["launcher"] == "mpirun (Open MPI)", "info under mpirun")

    # --groups cross-host on one host: the job lacks hosts, not ranks per host.
    groups = run(2, "allreduce", "--size", "1K", "--groups", "cross-host")
    errors = [line for line in groups.stderr.splitlines() if line.startswith("error:")]
    check(groups.returncode == 2 and len(errors) == 1 and "run on 2 or more hosts" in errors[0], groups.stderr)

    # pairs with more ranks than cores warns so; the report keeps CPU shares and a diagnosis.
    ranks = (os.cpu_count() or 2) + 1
    pairs = run(ranks, "pairs", "--size", "64K", "--iters", "2", "--latency-iters", "2", "--json", "pairs.json")
    check(pairs.returncode == 0, pairs.stderr)
    check("warning: more ranks than cores on a host" in pairs.stderr, f"no oversubscription warning: {pairs.stderr}")
    report = json.load(open(os.path.join(tmp, "pairs.json")))
    jsonschema.validate(report, json.load(open(args.schema)))
    result = report["results"][0]
    shares = [v for row in result["cpu_share"] for v in row if v is not None]
    check(len(shares) == ranks * (ranks - 1) and all(0 <= v <= 1 for v in shares), f"cpu_share {result['cpu_share']}")
    check(isinstance(result["diagnosis"], list) and isinstance(result["slow_latency"], list), "diagnosis keys")
    print("PASS")


if __name__ == "__main__":
    main()
