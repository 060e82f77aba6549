#!/usr/bin/env python3
"""Runs `parbench train` with the given flags, then `parbench plan` with the same flags, and
checks that the plan predicts what train measured: the memory ledger of the most loaded rank
within 2% per category, and the traffic of every parallel dimension exactly, calls and bytes
per collective (pipelines included: the reported rank's stage in full, and every rank's bytes
sent; train's own expected traffic, the same formula, must match on every rank). With
--paper-activations, plan's per-layer activation formula under --states zero (arXiv 2205.05198's
16-bit items; Llama's derived the same way) must be half the fp32 bytes per layer train's
ledger measured, within 2%, and equal the paper value train's report prints.

    check_plan_vs_train.py --parbench BIN --out DIR --ranks N --mpiexec "mpirun ..." [--paper-activations] -- TRAIN-ARGS...
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
    parser.add_argument("--paper-activations", action="store_true")
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

    plan = [args.parbench, "plan", "--gpus", str(args.ranks),
            "--dp", str(layout["dp"]), "--tp", str(layout["tp"]), "--pp", str(layout["pp"]),
            "--zero", str(layout["zero"]), "--microbatches", str(layout["microbatches"]),
            "--global-batch", str(result["global_batch"]), "--seq", str(result["seq_len"]),
            "--precision", result["precision"], "--bucket-mb", repr(layout["bucket_mb"])]
    model = train_args[train_args.index("--model") + 1] if "--model" in train_args else "gpt-tiny"
    plan += ["--model", model]
    if "--recompute" in train_args:
        plan += ["--recompute", train_args[train_args.index("--recompute") + 1]]
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
    predicted = run_plan(plan + ["--states", "parbench"], plan_json)
    measured = result["memory_bytes"]
    for measured_key, predicted_key in [("params", "params"), ("grads", "grads"), ("optimizer", "optimizer"),
                                        ("activations_peak", "activations"), ("total_peak", "total")]:
        m, p = measured[measured_key], predicted["memory_bytes"][predicted_key]
        if abs(m - p) > 0.02 * p:
            fail(f"{measured_key}: train measured {m} B, plan predicted {p} B\n$ " + " ".join(plan))
    checked = ["memory"]
    comm = result["comm"]
    at = comm["reported_rank"]
    by_rank = predicted["traffic_by_pp_rank"]
    if len(by_rank) != layout["pp"]:
        fail(f"plan gives the traffic of {len(by_rank)} pipeline ranks for pp {layout['pp']}")
    ours = by_rank[at["pp"]]
    # Under context parallelism train's gradient group is dp x cp ("dp_cp"), plan's "dp" the
    # same group.
    extents = {"dp": layout["dp"] * cp, "tp": layout["tp"], "pp": layout["pp"], "cp": cp}
    for dimension, extent in extents.items():
        if extent == 1:
            continue  # a group of one: train still counts a call (issue #10), plan counts none
        trained = "dp_cp" if dimension == "dp" and cp > 1 else dimension
        expected = ours.get(dimension, {})
        actual = comm[trained]
        if set(expected) != set(actual):
            fail(f"{dimension} collectives: plan {sorted(expected)}, train {sorted(actual)}")
        for op, volume in expected.items():
            for source, calls, nbytes in [("measured", actual[op]["calls"], actual[op]["bytes"]),
                                          ("expected", comm["expected_calls"][trained].get(op),
                                           comm["expected_bytes"][trained].get(op))]:
                if volume["calls"] != calls or volume["bytes"] != nbytes:
                    fail(f"{dimension} {op} on pipeline rank {at['pp']}: plan {volume['calls']} calls "
                         f"{volume['bytes']} B, train {source} {calls} calls {nbytes} B")
        if comm["expected_matches_all_ranks"][trained] is not True:
            fail(f"{dimension}: train's expected traffic differs from what some rank measured")
        checked.append(dimension + " traffic")
    if layout["pp"] > 1:
        for rank in result["bubble"]["by_rank"]:
            send = by_rank[rank["stage"]]["pp"].get("send", {"bytes": 0})["bytes"]
            if send != rank["p2p_bytes_sent"]:
                fail(f"rank {rank['rank']} (stage {rank['stage']}) sent {rank['p2p_bytes_sent']} B per step, "
                     f"plan predicted {send} B")
        checked.append(f"bytes sent by each of {len(result['bubble']['by_rank'])} ranks")
    if args.paper_activations:
        paper = run_plan(plan + ["--states", "zero"], os.path.join(args.out, "plan-zero.json"))["memory_bytes"]
        activation = result["activation_memory"]
        per_layer, measured_layer = paper["activation_bytes_per_layer"], activation["measured_bytes_per_layer"]
        if abs(measured_layer - 2 * per_layer) > 0.02 * measured_layer:
            fail(f"activations per layer: train's ledger {measured_layer} B (fp32), plan --states zero {per_layer} B "
                 f"(16-bit: {paper['activation_formula']}); twice that is more than 2% off")
        if activation.get("paper_bytes_per_layer") != per_layer:
            fail(f"train's report gives {activation.get('paper_bytes_per_layer')} B per layer as the paper's, plan "
                 f"{per_layer} B")
        checked.append(f"paper activations per layer ({measured_layer} B measured = 2 x {per_layer:.0f} B)")
    print(f"ok: {predicted['label']}: memory {measured['total_peak']} B measured = "
          f"{predicted['memory_bytes']['total']:.0f} B predicted; checked {', '.join(checked)}")


def run_plan(command, path):
    run = subprocess.run(command + ["--json", path], capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        fail("plan failed: " + " ".join(command) + "\n" + run.stdout + run.stderr)
    return json.load(open(path))["layouts"][0]


if __name__ == "__main__":
    main()
