#!/usr/bin/env python3
"""The training log (cli/iteration_log.hpp) end to end: its lines and the report's progress.steps.

    check_iteration_log.py --parbench BIN --mpiexec MPIEXEC --schema SCHEMA --out DIR

1. Megatron's fields on every line, the interval's mean time under --log-interval (not the last
   step's), tokens/s for a Llama model (samples/s only for the MLP), the same fields per step in
   the JSON, and consumed samples counting the global batch.
2. The grad norm is the model's, whatever the layout: each step's norm under dp, tp, pp, ZeRO-3
   and ep (whose routed experts' gradients are scaled by 1/ep, schemes/expert_split.cpp) equals
   the one-rank run's within float rounding.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

import jsonschema

FIELDS = ["consumed samples", "elapsed time per iteration (ms)", "learning rate", "global batch size", "lm loss",
          "grad norm", "TFLOP/s per rank", "MFU", "peak memory (MiB)", "number of skipped iterations",
          "number of nan iterations"]
STEP_KEYS = {"step", "timed", "timestamp", "consumed_samples", "time_ms", "learning_rate", "loss", "grad_norm",
             "tflops_per_rank", "mfu", "peak_memory_bytes", "skipped_iterations", "nan_iterations"}


class Runner:
    def __init__(self, args):
        self.parbench, self.mpiexec, self.out = args.parbench, args.mpiexec.split(), args.out
        self.schema = json.load(open(args.schema))

    def train(self, name, ranks, *arguments):
        report = os.path.join(self.out, f"iteration_log_{name}.json")
        if os.path.exists(report):
            os.remove(report)
        command = self.mpiexec + ["-np", str(ranks), self.parbench, "train", *arguments, "--json", report]
        done = subprocess.run(command, capture_output=True, text=True, timeout=240,
                              env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        if done.returncode != 0:
            sys.exit(f"FAIL: {' '.join(command)} exited {done.returncode}\n{done.stdout}{done.stderr}")
        document = json.load(open(report))
        jsonschema.validate(document, self.schema)
        return done.stdout, document["progress"]["steps"]


def fields_of(line):
    return {k.strip(): v.strip() for k, v in (part.split(":", 1) for part in line.split("|")[1:] if ":" in part)}


def check_lines(runner):
    stdout, steps = runner.train("llama", 1, "--model", "llama-tiny", "--warmup", "1", "--steps", "4",
                                 "--log-interval", "2", "--peak-tflops", "1")
    lines = [l for l in stdout.splitlines() if " iteration " in l]
    # Steps 2 and 4 close intervals of two; 5 is the last.
    if [re.search(r"iteration +(\d+)/5", l).group(1) for l in lines] != ["2", "4", "5"]:
        sys.exit(f"FAIL: lines at iterations 2, 4 and 5 expected:\n{stdout}")
    for line in lines:
        if not re.match(r"^ \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration", line):
            sys.exit(f"FAIL: no timestamp: {line}")
        found = fields_of(line)
        missing = [f for f in FIELDS if f not in found]
        if missing or "tokens/s" not in found or "samples/s" in found:
            sys.exit(f"FAIL: a Llama line has tokens/s and every Megatron field; missing {missing}: {line}")
    for step in steps:
        if set(step) != STEP_KEYS | {"tokens_per_s"}:
            sys.exit(f"FAIL: step keys {sorted(step)}")
    by_step = {s["step"]: s for s in steps}
    second = fields_of(lines[1])  # iterations 3 and 4
    mean_ms = (by_step[3]["time_ms"] + by_step[4]["time_ms"]) / 2
    if not math.isclose(float(second["elapsed time per iteration (ms)"]), mean_ms, abs_tol=0.006):
        sys.exit(f"FAIL: the line at 4 shows {second['elapsed time per iteration (ms)']} ms, the mean of 3 and 4 "
                 f"is {mean_ms:.3f}")
    mean_loss = (by_step[3]["loss"] + by_step[4]["loss"]) / 2
    if not math.isclose(float(second["lm loss"]), mean_loss, rel_tol=1e-6):
        sys.exit(f"FAIL: the line's loss {second['lm loss']} is not the interval's mean {mean_loss}")
    if int(second["consumed samples"]) != 4 * 8 or by_step[4]["consumed_samples"] != 32:
        sys.exit("FAIL: consumed samples after 4 steps of 8")
    if not math.isclose(float(second["grad norm"]), by_step[4]["grad_norm"], rel_tol=1e-3):
        sys.exit("FAIL: the line's grad norm is the last step's")
    mfu = float(second["MFU"].split()[0]) / 100
    if not math.isclose(mfu, float(second["TFLOP/s per rank"]) / 1.0, rel_tol=0.05, abs_tol=1e-4):
        sys.exit(f"FAIL: MFU {second['MFU']} against TFLOP/s {second['TFLOP/s per rank']} at --peak-tflops 1")
    stdout, steps = runner.train("mlp", 1, "--model", "mlp-tiny", "--warmup", "0", "--steps", "1")
    line = next(l for l in stdout.splitlines() if " iteration " in l)
    if "samples/s" not in fields_of(line) or "loss" not in fields_of(line) or "samples_per_s" not in steps[0]:
        sys.exit(f"FAIL: the MLP has no tokens: samples/s expected: {line}")
    print("PASS: the log's lines and steps")


def norms(steps):
    return [s["grad_norm"] for s in steps]


def check_norms(runner):
    few = ["--warmup", "0", "--steps", "2"]
    cases = [("llama-tiny", [(2, ["--dp", "2"]), (2, ["--tp", "2"]), (2, ["--pp", "2", "--microbatches", "2"]),
                             (2, ["--dp", "2", "--zero", "3"])]),
             ("gpt-tiny", [(2, ["--pp", "2", "--microbatches", "2"])]),  # the tied embedding on two stages
             ("gpt-moe-tiny", [(2, ["--ep", "2"])])]
    for model, layouts in cases:
        _, reference = runner.train(f"{model}_1", 1, "--model", model, *few)
        for ranks, layout in layouts:
            _, steps = runner.train(f"{model}_{'_'.join(layout)}", ranks, "--model", model, *few, *layout)
            for want, got in zip(norms(reference), norms(steps)):
                if not math.isclose(want, got, rel_tol=1e-4):
                    sys.exit(f"FAIL: {model} {' '.join(layout)}: grad norms {norms(steps)}, one rank {norms(reference)}")
            print(f"PASS: {model} {' '.join(layout)}: grad norms {norms(steps)}")


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--parbench", "--mpiexec", "--schema", "--out"):
        parser.add_argument(flag, required=True)
    runner = Runner(parser.parse_args())
    check_lines(runner)
    check_norms(runner)


if __name__ == "__main__":
    main()
