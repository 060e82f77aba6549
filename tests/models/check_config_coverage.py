#!/usr/bin/env python3
"""Every model config in configs/models/ that train can run on this machine is run by the suite
under --check: the configs the suite runs are named on the command line (--covered), and each
other one must be beyond a 2-rank --check here, by the parameter count plan reports for it.
A 2-rank --check holds at least 32 bytes per parameter: fp32 parameters, gradients and Adam's two
moments (16 B) on the ranks between them, and again in rank 0's serial reference. Beyond
--budget-gib (a third of this 24 GiB machine, which CI and other work share) it cannot run here.

  check_config_coverage.py --parbench BIN --configs DIR --covered 'a;b;...' [--budget-gib 8]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

BYTES_PER_PARAMETER = 32


def parameters(parbench, model, scratch):
    report = os.path.join(scratch, f"{model}.json")
    # Exit status 3: the layout does not fit the device; the report still gives the model.
    run = subprocess.run([parbench, "plan", "--model", model, "--gpus", "1", "--json", report], capture_output=True,
                         text=True, timeout=60)
    if run.returncode not in (0, 3):
        sys.exit(f"plan --model {model} failed with exit status {run.returncode}: {run.stderr.strip()}")
    with open(report) as handle:
        return json.load(handle)["inputs"]["model"]["parameters"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--configs", required=True)
    parser.add_argument("--covered", required=True, help="';'-separated config names the suite runs under --check")
    parser.add_argument("--budget-gib", type=float, default=8.0)
    args = parser.parse_args()
    shipped = sorted(name[:-5] for name in os.listdir(args.configs) if name.endswith(".json"))
    covered = [name for name in args.covered.split(";") if name]
    failures = [f"{name} is listed as covered but configs/models/{name}.json does not exist"
                for name in covered if name not in shipped]
    budget = args.budget_gib * 2**30
    with tempfile.TemporaryDirectory() as scratch:
        for name in shipped:
            if name in covered:
                continue
            count = parameters(args.parbench, name, scratch)
            need = count * BYTES_PER_PARAMETER
            verdict = "beyond this machine" if need > budget else "FITS, yet no test runs it"
            print(f"{name}: {count / 1e6:.0f}M parameters, >= {need / 2**30:.1f} GiB for a 2-rank --check: {verdict}")
            if need <= budget:
                failures.append(f"{name} fits a 2-rank --check here ({need / 2**30:.1f} GiB <= {args.budget_gib} GiB) "
                                "but the suite does not run it: add it to tests/models/CMakeLists.txt")
    for failure in failures:
        print("FAILED:", failure)
    print(f"{len(covered)} configs run under --check, {len(shipped) - len(covered)} beyond this machine")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
