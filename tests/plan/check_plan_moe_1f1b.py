#!/usr/bin/env python3
"""`parbench plan --moe-a2a-overlap-1f1b` as a user runs it.

Refusals: every layout train refuses the flag on (no --ep, with --moe-a2a-overlap, another
schedule, one micro-batch, --etp 2, --recompute full, --cp, MoE layers on the last stage only) is
refused by plan with train's own line (one rule, theory/moe_a2a_overlap_1f1b.hpp), exit 2 for both
and no plan JSON written; plan's own refusals (a dense model, with --search) name the flag.

Output: a 4-layer MoE model over 2 stages priced with and without the flag under --states
parbench: the same memory, traffic per line and F/B/W counts (pairing moves nothing more), the
layout marked in the label and JSON, paired groups only off the last stage, the last stage's
exposure the blocking one, the first stage's lower, the step's exposed ep the most exposed
stage's, and the approximation stated; with the first stage holding 3 of the 4 MoE layers
(--stage-layers 3,1) the pairing shortens the predicted step.

    check_plan_moe_1f1b.py --parbench BIN --mpiexec "mpirun ..." --out DIR
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
PIPE = os.path.join(HERE, "llama-moe-pipe.json")  # layers 1 and 3 MoE
EVERY = os.path.join(HERE, "..", "train", "llama-moe-every-layer.json")  # every layer MoE
FLAG = "--moe-a2a-overlap-1f1b"
BASE = ["--ep", "2", "--dp", "2", "--pp", "2", "--microbatches", "2"]
# Flags that break one of the rule's conditions each: the model, then the layout.
SHARED_REFUSALS = [
    (PIPE, ["--pp", "2", "--microbatches", "2"], "needs --ep 2 or more"),
    (PIPE, BASE + ["--moe-a2a-overlap"], "with --moe-a2a-overlap"),
    (PIPE, BASE + ["--schedule", "gpipe"], "needs --pp 2 or more with --schedule 1f1b"),
    (PIPE, ["--ep", "2", "--dp", "2", "--pp", "2", "--microbatches", "1"], "needs --microbatches 2 or more"),
    (PIPE, BASE + ["--tp", "2", "--etp", "2"], "with --etp 2"),
    (PIPE, BASE + ["--recompute", "full"], "with --recompute full"),
    (PIPE, BASE + ["--cp", "2"], "with --cp"),
    ("llama-moe-tiny", BASE, "MoE layers on the last pipeline stage only"),
]

failures = []
VALIDATOR = jsonschema.Draft202012Validator(json.load(open(os.path.join(HERE, "..", "..", "schemas", "plan.schema.json"))))


def check(condition, message):
    if not condition:
        failures.append(message)


def error_lines(result):
    return [line for line in result.stderr.splitlines() if line.strip()]


def plan(args, flags, path=None):
    command = [args.parbench, "plan", "--states", "parbench", "--precision", "fp32"] + flags
    if path:
        command += ["--json", path]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def refusals(args):
    for model, flags, needle in SHARED_REFUSALS:
        flags = ["--model", model] + flags + [FLAG]
        shown = " ".join(flags)
        # train checks the flag's rule before the world's size: 2 ranks refuse every case.
        train = subprocess.run(shlex.split(args.mpiexec) + ["-np", "2", args.parbench, "train", "--steps", "1"] + flags,
                               capture_output=True, text=True, timeout=120)
        path = os.path.join(args.out, "refused.json")
        if os.path.exists(path):
            os.remove(path)
        planned = plan(args, flags, path)
        train_errors = [line for line in train.stderr.splitlines() if line.startswith("error:")]
        plan_errors = error_lines(planned)
        check(train.returncode == 2 and len(train_errors) == 1,
              f"{shown}: train exited {train.returncode} with {train_errors} (want 2 and one error line)")
        check(planned.returncode == 2 and len(plan_errors) == 1 and not os.path.exists(path),
              f"{shown}: plan exited {planned.returncode} with {plan_errors} (want 2, one line, no JSON)")
        if train_errors and plan_errors:
            check(train_errors[0] == plan_errors[0], f"{shown}: train and plan differ:\n  {train_errors[0]}\n  "
                                                     f"{plan_errors[0]}")
            check(FLAG in plan_errors[0] and needle in plan_errors[0], f"{shown}: {plan_errors[0]!r} lacks {needle!r}")
        print(f"{shown}\n  {plan_errors[0] if plan_errors else '(no line)'}")
    for flags, needles in ((["--model", "llama-tiny", "--pp", "2", "--microbatches", "2", FLAG], [FLAG, "no experts"]),
                           (["--model", "mixtral-8x7b", "--gpus", "64", "--search", FLAG], [FLAG, "--search"])):
        result = subprocess.run([args.parbench, "plan"] + flags, capture_output=True, text=True, timeout=120)
        lines = error_lines(result)
        check(result.returncode == 2 and len(lines) == 1 and all(n in lines[0] for n in needles),
              f"{' '.join(flags)}: exit {result.returncode}, {lines} (want 2, one line with {needles})")


def layout_of(args, name, flags):
    path = os.path.join(args.out, name + ".json")
    result = plan(args, flags, path)
    if result.returncode != 0:
        failures.append(f"{name}: plan exited {result.returncode}: {result.stderr.strip()}")
        return None, ""
    document = json.load(open(path))
    errors = list(VALIDATOR.iter_errors(document))
    check(not errors, f"{name}: does not follow plan.schema.json: {errors[:1]}")
    return document["layouts"][0], result.stdout


def outputs(args):
    flags = ["--model", EVERY, "--dp", "2", "--ep", "2", "--pp", "2", "--microbatches", "4", "--global-batch", "16",
             "--cores-per-host", "2"]
    blocking, _ = layout_of(args, "blocking", flags)
    paired, console = layout_of(args, "paired", flags + [FLAG])
    if blocking is None or paired is None:
        return
    check(paired["memory_bytes"]["total"] == blocking["memory_bytes"]["total"], "pairing changed the memory")
    check(paired["traffic_by_pp_rank"] == blocking["traffic_by_pp_rank"], "pairing changed the traffic")
    check(paired["passes_by_pp_rank"] == blocking["passes_by_pp_rank"], "pairing changed the F/B/W counts")
    check([(c["dimension"], c["collective"], c["calls"], c["bytes"]) for c in paired["comm"]] ==
          [(c["dimension"], c["collective"], c["calls"], c["bytes"]) for c in blocking["comm"]],
          "pairing changed the comm lines")
    check(paired["layout"]["moe_a2a_overlap_1f1b"] is True and blocking["layout"]["moe_a2a_overlap_1f1b"] is False,
          f"layout.moe_a2a_overlap_1f1b: {paired['layout']['moe_a2a_overlap_1f1b']}")
    check("a2a-1f1b" in paired["label"] and "a2a-1f1b" not in blocking["label"], f"labels {paired['label']!r}")
    check("a2a-1f1b" in console and "moe a2a-1f1b: exposed all-to-all per stage 0: 3 paired" in console and
          "1: 0 paired" in console, f"the console does not show the paired layout per stage: {console[-1500:]}")
    check(blocking["moe"]["a2a_overlap_1f1b"] is None, "a blocking layout carries the pairing's figures")
    pairs = paired["moe"]["a2a_overlap_1f1b"]
    # 1F1B, 2 stages, 4 micro-batches: 3 groups on the first stage, none on the last.
    check(pairs["paired_groups_by_pp_rank"] == [3, 0], f"paired groups {pairs['paired_groups_by_pp_rank']}")
    exposed, plain = pairs["exposed_ms_by_pp_rank"], pairs["blocking_exposed_ms_by_pp_rank"]
    check(exposed[1] == plain[1], f"the last stage is not blocking: {exposed} vs {plain}")
    check(exposed[0] < plain[0], f"the first stage's exposure did not fall: {exposed} vs {plain}")
    check(paired["time_ms"]["exposed_ep"] == max(exposed), f"exposed ep {paired['time_ms']['exposed_ep']} not the "
                                                           f"most exposed stage's {exposed}")
    check(blocking["time_ms"]["exposed_ep"] == max(plain) or abs(blocking["time_ms"]["exposed_ep"] - max(plain)) <
          1e-9 * max(plain), f"blocking exposed ep {blocking['time_ms']['exposed_ep']} vs {plain}")
    approximations = json.load(open(os.path.join(args.out, "paired.json")))["inputs"]["model"]["moe_approximations"]
    check("--moe-a2a-overlap-1f1b" in approximations and "progresses on its own" in approximations,
          f"the approximation is not stated: {approximations!r}")
    # The last stage blocking sets the step when the stages hold the same MoE layers; with 3 of
    # them on the first stage the pairs shorten it.
    uneven = flags + ["--stage-layers", "3,1"]
    uneven_blocking, _ = layout_of(args, "uneven_blocking", uneven)
    uneven_paired, _ = layout_of(args, "uneven_paired", uneven + [FLAG])
    if uneven_blocking and uneven_paired:
        check(uneven_paired["time_ms"]["step"] < uneven_blocking["time_ms"]["step"],
              f"--stage-layers 3,1: paired step {uneven_paired['time_ms']['step']} not below blocking "
              f"{uneven_blocking['time_ms']['step']}")
        print(f"--stage-layers 3,1: step {uneven_blocking['time_ms']['step']:.4f} ms blocking, "
              f"{uneven_paired['time_ms']['step']:.4f} ms paired")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    refusals(args)
    outputs(args)
    for failure in failures:
        print("FAIL: " + failure)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
