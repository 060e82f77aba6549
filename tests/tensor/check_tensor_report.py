#!/usr/bin/env python3
"""Runs one `parbench train` line through tests/train/check_train_report.py, then checks what
tensor parallelism adds to the report:

    check_tensor_report.py --checker CHECK_TRAIN_REPORT --json OUT [checker options] -- CMD...

- comm.expected_matches.tp is true, and each collective's measured calls and bytes per step
  (comm.tp) equal the analytic ones (comm.expected_calls.tp, comm.expected_bytes.tp;
  docs/tensor.md);
- for a GPT, the activation memory one layer keeps (ledger) equals the formula's.

    check_tensor_report.py --refused STATUS --json OUT --message TEXT -- CMD...

judges a refused run: exit STATUS, exactly one line starting "error: " that contains TEXT
(mpirun's own notices about a non-zero exit are not the tool's output), and no report.
"""
import json
import os
import subprocess
import sys


def option(args, name):
    value = args[args.index(name) + 1]
    del args[args.index(name):args.index(name) + 2]
    return value


def judge_refused(args):
    status = int(option(args, "--refused"))
    report = option(args, "--json")
    message = option(args, "--message")
    command = args[1:] if args and args[0] == "--" else args
    if os.path.exists(report):
        os.remove(report)
    run = subprocess.run(command, capture_output=True, text=True, timeout=240)
    output = "$ " + " ".join(command) + "\n" + run.stdout + run.stderr
    errors = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("error")]
    if run.returncode != status:
        print(f"FAIL: exit status {run.returncode}, expected {status}\n{output}")
        sys.exit(1)
    if len(errors) != 1 or not errors[0].startswith("error: ") or message not in errors[0]:
        print(f"FAIL: expected one 'error: ' line containing {message!r}, got {errors}\n{output}")
        sys.exit(1)
    if os.path.exists(report):
        print("FAIL: a report was written for a refused run")
        sys.exit(1)
    print("ok: " + errors[0])


def main():
    args = sys.argv[1:]
    if "--refused" in args:
        judge_refused(args)
        return
    checker = option(args, "--checker")
    run = subprocess.run([sys.executable, checker] + args, capture_output=True, text=True)
    print(run.stdout + run.stderr, end="")
    if run.returncode != 0:
        sys.exit(run.returncode)
    result = json.load(open(args[args.index("--json") + 1]))["results"][0]
    comm = result["comm"]
    expected_calls, expected_bytes, measured = comm["expected_calls"]["tp"], comm["expected_bytes"]["tp"], comm["tp"]
    for op, calls in expected_calls.items():
        got = measured.get(op, {"calls": 0, "bytes": 0})
        if got["calls"] != calls or got["bytes"] != expected_bytes[op]:
            print(f"FAIL: tp {op}: measured {got['calls']} calls / {got['bytes']} B per step, "
                  f"expected {calls} / {expected_bytes[op]}")
            sys.exit(1)
    if set(measured) != set(expected_calls):
        print(f"FAIL: tp collectives {sorted(measured)}, expected {sorted(expected_calls)}")
        sys.exit(1)
    if comm["expected_matches"]["tp"] is not True:
        print("FAIL: comm.expected_matches.tp is not true")
        sys.exit(1)
    activation = result["activation_memory"]
    if "formula_bytes_per_layer" in activation and \
            activation["measured_bytes_per_layer"] != activation["formula_bytes_per_layer"]:
        print(f"FAIL: activation bytes per layer {activation['measured_bytes_per_layer']}, "
              f"formula {activation['formula_bytes_per_layer']}")
        sys.exit(1)
    print(f"ok: tp traffic {sum(expected_bytes.values()):.0f} B/step as expected; "
          f"activations {activation['measured_bytes_per_layer']} B/layer")


if __name__ == "__main__":
    main()
