#!/usr/bin/env python3
"""Runs one `parbench train` command line and judges it as a user would.

    check_train_report.py --json OUT [--expect-exit N] [--expect-no-report] [--field PATH=VALUE ...] -- CMD...

With --expect-exit 0 (the default) the report must exist, follow the train result shape,
say check.passed when --check was given, and carry the --field values (dotted paths into
results[0], compared as JSON). With a non-zero exit status the run must print exactly one
line on stderr and, with --expect-no-report, leave no report file behind.
"""
import argparse
import json
import os
import subprocess
import sys

import jsonschema

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schemas", "report.schema.json")

REQUIRED = ["model", "layout", "global_batch", "seq_len", "warmup", "steps", "step_time_ms",
            "step_time_samples_ms", "tokens_per_s", "flops", "achieved_tflops_per_rank", "mfu",
            "memory_bytes", "memory_theoretical_bytes", "memory_predicted_bytes", "comm", "exposed_comm_ms", "loss"]


def fail(message, output=""):
    print("FAIL: " + message)
    if output:
        print(output)
    sys.exit(1)


def lookup(result, path):
    value = result
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    parser.add_argument("--expect-exit", type=int, default=0)
    parser.add_argument("--expect-no-report", action="store_true")
    parser.add_argument("--field", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command and args.command[0] == "--" else args.command
    if os.path.exists(args.json):
        os.remove(args.json)
    run = subprocess.run(command, capture_output=True, text=True, timeout=240)
    output = "$ " + " ".join(command) + "\n" + run.stdout + run.stderr
    if run.returncode != args.expect_exit:
        fail(f"exit status {run.returncode}, expected {args.expect_exit}", output)

    if args.expect_exit != 0:
        # mpirun adds its own banner about the non-zero exit; parbench's lines start with a tag.
        errors = [line for line in run.stderr.splitlines() if line.startswith(("error:", "warning:"))]
        if len(errors) != 1 or not errors[0].startswith("error: "):
            fail(f"expected exactly one 'error:' line from parbench on stderr, got {len(errors)}", output)
        if args.expect_no_report and os.path.exists(args.json):
            fail("a report was written for a refused run", output)
        print("ok: " + errors[0])
        return

    with open(args.json) as handle:
        report = json.load(handle)
    if report.get("schema") != "parbench.report/v1" or report.get("command") != "train":
        fail("not a train report", output)
    try:
        jsonschema.validate(report, json.load(open(SCHEMA)))
    except jsonschema.ValidationError as error:
        fail(f"report does not follow schemas/report.schema.json: {error.message} at {list(error.absolute_path)}",
             output)
    results = report["results"]
    if len(results) != 1:
        fail(f"{len(results)} results, expected 1", output)
    result = results[0]
    for key in REQUIRED:
        if key not in result:
            fail(f"results[0] lacks '{key}'", output)
    if len(result["step_time_samples_ms"]) != result["steps"]:
        fail("one step time sample per timed step expected", output)
    if len(result["loss"]) != result["steps"] + result["warmup"]:
        fail("one loss per step expected", output)
    for key in ["params", "grads", "optimizer", "activations_peak", "total_peak"]:
        if not result["memory_bytes"][key] > 0:
            fail(f"memory_bytes.{key} is not positive", output)
    # The buffer-aware theory (plan/memory.hpp) predicts the ledger: within 2% per category.
    predicted = result["memory_predicted_bytes"]
    for measured_key, predicted_key in [("params", "params"), ("grads", "grads"), ("optimizer", "optimizer"),
                                        ("activations_peak", "activations"), ("total_peak", "total")]:
        measured, theory = result["memory_bytes"][measured_key], predicted[predicted_key]
        if abs(measured - theory) > 0.02 * theory:
            fail(f"memory {measured_key}: measured {measured} B, buffer-aware theory {theory} B: more than 2% apart",
                 output)
    if "--check" in command or "-c" in command:
        check = result.get("check")
        if not check or check.get("passed") is not True:
            fail(f"check did not pass: {check}", output)
    for field in args.field:
        path, expected = field.split("=", 1)
        actual = lookup(result, path)
        if actual != json.loads(expected):
            fail(f"{path} = {json.dumps(actual)}, expected {expected}", output)
    print(f"ok: {result['layout']['scheme']} dp={result['layout']['dp']} "
          f"median {result['step_time_ms']['median']:.2f} ms, "
          f"memory {result['memory_bytes']['total_peak']} B = theory {predicted['total']:.0f} B, check {result.get('check', {}).get('passed')}")


if __name__ == "__main__":
    main()
