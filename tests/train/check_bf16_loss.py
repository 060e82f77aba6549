#!/usr/bin/env python3
"""Runs one `parbench train` command line in fp32 and in bf16 and compares the losses.

    check_bf16_loss.py --out DIR [--max-rel-diff X] -- CMD...

bf16 rounds every matmul's operands (8 significant bits), so its losses must differ from
fp32's (else bf16 silently ran fp32), yet stay within --max-rel-diff of them at every step
(else the rounding or the master weights are wrong). Both reports must name their precision.
"""
import argparse
import json
import math
import os
import subprocess
import sys


def run(command, precision, out_dir):
    report = os.path.join(out_dir, f"bf16_loss_{precision}.json")
    if os.path.exists(report):
        os.remove(report)
    full = command + ["--precision", precision, "--json", report]
    done = subprocess.run(full, capture_output=True, text=True, timeout=240)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(full)} exited {done.returncode}\n{done.stdout}{done.stderr}")
    with open(report) as f:
        result = json.load(f)["results"][0]
    if result["precision"] != precision:
        sys.exit(f"FAIL: the {precision} report says precision {result['precision']!r}")
    return result["loss"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-rel-diff", type=float, default=1e-2)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command and args.command[0] == "--" else args.command
    fp32 = run(command, "fp32", args.out)
    bf16 = run(command, "bf16", args.out)
    if len(fp32) != len(bf16) or not fp32:
        sys.exit(f"FAIL: {len(fp32)} fp32 losses, {len(bf16)} bf16 losses")
    worst = 0.0
    for step, (a, b) in enumerate(zip(fp32, bf16)):
        if not (math.isfinite(a) and math.isfinite(b)):
            sys.exit(f"FAIL: step {step}: loss fp32 {a}, bf16 {b}")
        worst = max(worst, abs(b - a) / abs(a))
    print(f"fp32 losses {fp32}\nbf16 losses {bf16}\nmax relative difference {worst:.3e}")
    if worst == 0.0:
        sys.exit("FAIL: bf16 losses equal fp32's exactly: the matmuls did not round to bf16")
    if worst >= args.max_rel_diff:
        sys.exit(f"FAIL: relative difference {worst:.3e} >= {args.max_rel_diff}")
    print("PASS")


if __name__ == "__main__":
    main()
