#!/usr/bin/env python3
"""Runs `parbench train` with the given flags, then `parbench plan` with the same flags, and
checks that the plan predicts what train measured: the memory ledger of the most loaded rank
within 2% per category, and (without a pipeline, whose per-stage traffic the train report does
not split yet) the data- and tensor-parallel traffic exactly, calls and bytes per collective.

    check_plan_vs_train.py --parbench BIN --out DIR --ranks N --mpiexec "mpirun ..." -- TRAIN-ARGS...
"""
import argparse
import json
import os
import shlex
import subprocess
import sys


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("train_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    train_args = args.train_args[1:] if args.train_args[:1] == ["--"] else args.train_args
    os.makedirs(args.out, exist_ok=True)
    train_json = os.path.join(args.out, "train.json")
    plan_json = os.path.join(args.out, "plan.json")
    command = shlex.split(args.mpiexec) + ["-np", str(args.ranks), args.parbench, "train", "--warmup", "0",
                                           "--steps", "1"] + train_args + ["--json", train_json]
    run = subprocess.run(command, capture_output=True, text=True, timeout=200)
    if run.returncode != 0:
        fail("train failed: " + " ".join(command) + "\n" + run.stdout + run.stderr)
    result = json.load(open(train_json))["results"][0]
    layout = result["layout"]

    plan = [args.parbench, "plan", "--states", "parbench", "--gpus", str(args.ranks),
            "--dp", str(layout["dp"]), "--tp", str(layout["tp"]), "--pp", str(layout["pp"]),
            "--zero", str(layout["zero"]), "--microbatches", str(layout["microbatches"]),
            "--global-batch", str(result["global_batch"]), "--seq", str(result["seq_len"]),
            "--precision", result["precision"], "--bucket-mb", repr(layout["bucket_mb"])]
    model = train_args[train_args.index("--model") + 1] if "--model" in train_args else "gpt-tiny"
    plan += ["--model", model]
    for flag in ["sp", "overlap", "prefetch"]:
        if layout[flag]:
            plan.append("--" + flag)
    cp = layout.get("cp", 1)
    if cp > 1:
        plan += ["--cp", str(cp), "--cp-style", layout["cp_style"], "--cp-balance", layout["cp_balance"]]
    if layout["pp"] > 1:
        pipeline = result["pipeline"]
        plan += ["--schedule", pipeline["schedule"], "--virtual-stages", str(pipeline["virtual_stages"]),
                 "--p2p", pipeline["p2p"]]
    plan += ["--json", plan_json]
    run = subprocess.run(plan, capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        fail("plan failed: " + " ".join(plan) + "\n" + run.stdout + run.stderr)
    predicted = json.load(open(plan_json))["layouts"][0]

    measured = result["memory_bytes"]
    for measured_key, predicted_key in [("params", "params"), ("grads", "grads"), ("optimizer", "optimizer"),
                                        ("activations_peak", "activations"), ("total_peak", "total")]:
        m, p = measured[measured_key], predicted["memory_bytes"][predicted_key]
        if abs(m - p) > 0.02 * p:
            fail(f"{measured_key}: train measured {m} B, plan predicted {p} B\n$ " + " ".join(plan))
    checked = ["memory"]
    if layout["pp"] == 1:
        # Under context parallelism train's gradient group is dp x cp ("dp_cp"), plan's "dp"
        # line the same group; plan leaves out a ring's receives (the other end of its sends).
        for dimension, extent in [("dp", layout["dp"] * cp), ("tp", layout["tp"]), ("cp", cp)]:
            if extent == 1:
                continue  # a group of one: train still counts a call (issue #10), plan counts none
            expected = {line["collective"]: line for line in predicted["comm"] if line["dimension"] == dimension}
            actual = dict(result["comm"]["dp_cp" if dimension == "dp" and cp > 1 else dimension])
            if dimension == "cp":
                actual.pop("recv", None)
            if set(expected) != set(actual):
                fail(f"{dimension} collectives: plan {sorted(expected)}, train {sorted(actual)}")
            for op, line in expected.items():
                if line["calls"] != actual[op]["calls"] or line["bytes"] != actual[op]["bytes"]:
                    fail(f"{dimension} {op}: plan {line['calls']} calls {line['bytes']} B, train "
                         f"{actual[op]['calls']} calls {actual[op]['bytes']} B")
            checked.append(dimension + " traffic")
    print(f"ok: {predicted['label']}: memory {measured['total_peak']} B measured = "
          f"{predicted['memory_bytes']['total']:.0f} B predicted; checked {', '.join(checked)}")


if __name__ == "__main__":
    main()
