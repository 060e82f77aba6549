#!/usr/bin/env python3
"""train and plan refuse the same bad layout with the same line (issue 21: one Layout check shared
by both, theory/layout.hpp). Each case runs `train` at 2 ranks and `plan --gpus 2` with the
same flags (plan under --states parbench --precision fp32, the plan of train's own run, so the
engine's rules apply to both); both must exit 2 with one `error:` line, and the lines must be equal.
The world-size rule names each command's own source of the size (mpirun -np, --gpus): its two lines
must be equal once those words are swapped.

  check_layout_messages.py --parbench BIN --mpiexec "mpirun ..."
"""
import argparse
import shlex
import subprocess
import sys

# Flags that break one rule each (gpt-small: 4 layers, sequence 128; mlp-tiny has no sequence).
CASES = [
    ["--pp", "2", "--schedule", "interleaved", "--virtual-stages", "2", "--microbatches", "3"],
    ["--pp", "2", "--virtual-stages", "2"],
    ["--pp", "2", "--stage-layers", "3,3"],
    ["--pp", "2", "--zero", "2"],
    ["--pp", "2", "--overlap"],
    ["--pp", "2", "--schedule", "zb-h1", "--recompute", "full", "--microbatches", "2"],
    ["--pp", "2", "--schedule", "interleaved", "--virtual-stages", "2", "--p2p", "blocking", "--microbatches", "2"],
    ["--pp", "2", "--schedule", "zb-h1", "--tp", "2", "--sp", "--microbatches", "2", "--dp", "1"],
    ["--virtual-stages", "2"],
    ["--cp", "3"],
    ["--cp-balance", "none"],
    ["--cp", "2", "--cp-style", "sideways"],
    ["--sp"],
    ["--tp", "2", "--sp", "--seq", "129"],
    ["--tp", "3", "--dp", "1"],
    ["--prefetch", "--zero", "1"],
    ["--global-batch", "3"],
    ["--model", "mlp-tiny", "--pp", "2"],
    ["--model", "mlp-tiny", "--cp", "2"],
    ["--model", "llama-tiny", "--recompute", "selective-op"],  # plan-only: torchtitan's op-level policy
]
WORLD_CASE = ["--dp", "3"]


def error_lines(run):
    return [line for line in run.stderr.splitlines() if line.startswith("error:")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--mpiexec", required=True)
    args = parser.parse_args()

    def both(flags):
        if "--model" not in flags:
            flags = ["--model", "gpt-small"] + flags
        train = subprocess.run(shlex.split(args.mpiexec) + ["-np", "2", args.parbench, "train", "--steps", "1"] + flags,
                               capture_output=True, text=True, timeout=120)
        plan = subprocess.run([args.parbench, "plan", "--gpus", "2", "--states", "parbench", "--precision", "fp32"] +
                              flags, capture_output=True, text=True, timeout=60)
        return train, plan

    failures = []

    def compare(flags, train, plan, swap=None):
        shown = " ".join(flags)
        for name, run in (("train", train), ("plan", plan)):
            if run.returncode != 2 or len(error_lines(run)) != 1:
                failures.append(f"{shown}: {name} exited {run.returncode} with {error_lines(run)} (want 2 and one "
                                f"error line)\n{run.stderr[-2000:]}")
                return
        train_line, plan_line = error_lines(train)[0], error_lines(plan)[0]
        if swap:
            for old, new in swap:
                plan_line = plan_line.replace(old, new)
        print(f"{shown}\n  train: {error_lines(train)[0]}\n  plan:  {error_lines(plan)[0]}")
        if train_line != plan_line:
            failures.append(f"{shown}: train and plan differ:\n  {error_lines(train)[0]}\n  {error_lines(plan)[0]}")

    for flags in CASES:
        compare(flags, *both(flags))
    compare(WORLD_CASE, *both(WORLD_CASE), swap=[("GPUs", "ranks"), ("--gpus", "mpirun -np")])
    for failure in failures:
        print("FAIL: " + failure)
    print(f"{len(CASES) + 1 - len(failures)} of {len(CASES) + 1} bad layouts refused alike by train and plan")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
