#!/usr/bin/env python3
"""Runs one `parbench train` MoE command line with and without --moe-a2a-overlap and compares.

    check_moe_overlap.py --out DIR --name NAME [--flag=--moe-a2a-overlap-1f1b] -- CMD...

With --flag=--moe-a2a-overlap-1f1b the overlapped run pairs 1F1B's forward and backward passes
(train/pipeline/pipeline_executor.hpp): the same exchanges, each waited for after the partner
pass has run, so the same calls as blocking; and since a pass waits on every exchange it posts
while the partner computes, some MoE layer (one of a paired stage) must show exposed below time.

The overlap only reorders when the layer waits (each alltoallv as two halves that keep the
blocking exchange's layout, chunks and accumulation order), so the two runs must agree
exactly: every step's loss and, under --check, the distance of the final parameters from the
serial reference. The overlapped run must issue twice the ep group's alltoallv calls (two
halves each), and its exposure must be honest: per MoE layer the exposed dispatch and combine
never exceed their time; without overlap every call blocks, so exposed equals time exactly.
No timing is asserted beyond that (CI machines are shared); scripts/bench/bench_moe.sh measures.
"""
import argparse
import json
import os
import subprocess
import sys


def run(command, overlap, out_dir, name, flag):
    report = os.path.join(out_dir, f"{name}_{'overlap' if overlap else 'blocking'}.json")
    if os.path.exists(report):
        os.remove(report)
    full = command + ([flag] if overlap else []) + ["--json", report]
    done = subprocess.run(full, capture_output=True, text=True, timeout=240)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(full)} exited {done.returncode}\n{done.stdout}{done.stderr}")
    with open(report) as f:
        result = json.load(f)["results"][0]
    key = "a2a_overlap_1f1b" if flag == "--moe-a2a-overlap-1f1b" else "a2a_overlap"
    if result["moe"].get(key, False) != overlap:
        sys.exit(f"FAIL: the report says {key} {result['moe'].get(key)}, expected {overlap}")
    if "check" in result and not result["check"]["passed"]:
        sys.exit(f"FAIL: {' '.join(full)}: --check failed: {result['check']}")
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--flag", default="--moe-a2a-overlap", choices=["--moe-a2a-overlap", "--moe-a2a-overlap-1f1b"])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command and args.command[0] == "--" else args.command
    blocking = run(command, False, args.out, args.name, args.flag)
    overlap = run(command, True, args.out, args.name, args.flag)
    across = args.flag == "--moe-a2a-overlap-1f1b"
    failures = []
    if blocking["loss"] != overlap["loss"]:
        failures.append(f"losses differ: blocking {blocking['loss']}, overlap {overlap['loss']}")
    for key in ("max_rel_diff_loss", "max_rel_diff_params"):
        if "check" in blocking and blocking["check"][key] != overlap["check"][key]:
            failures.append(f"check.{key} differs: blocking {blocking['check'][key]!r}, overlap {overlap['check'][key]!r}")
    # The reported rank's calls (a pipeline stage without MoE layers makes none: 0 and 0).
    calls = [r["comm"].get("ep", {}).get("alltoallv", {}).get("calls", 0) for r in (blocking, overlap)]
    ratio = 1 if across else 2
    if calls[1] != ratio * calls[0]:
        failures.append(f"ep alltoallv calls per step: blocking {calls[0]}, overlap {calls[1]} (expected {ratio}x)")
    if across and not any(layer["dispatch_exposed_ms"] + layer["combine_exposed_ms"] <
                          layer["dispatch_ms"] + layer["combine_ms"] for layer in overlap["moe"]["layers"]):
        failures.append("no MoE layer's exchanges were overlapped: exposed equals time in every layer "
                        "(were any forward and backward passes paired?)")
    for label, result in (("blocking", blocking), ("overlap", overlap)):
        for layer in result["moe"]["layers"]:
            for part in ("dispatch", "combine"):
                time, exposed = layer[f"{part}_ms"], layer[f"{part}_exposed_ms"]
                if label == "blocking" and exposed != time:
                    failures.append(f"blocking layer {layer['layer']}: {part} exposed {exposed} != time {time}")
                if exposed > time:
                    failures.append(f"{label} layer {layer['layer']}: {part} exposed {exposed} > time {time}")
            total = layer["dispatch_exposed_ms"] + layer["combine_exposed_ms"] + layer["counts_ms"]
            if abs(layer["exposed_ms"] - total) > 1e-9 * max(1.0, total):
                failures.append(f"{label} layer {layer['layer']}: exposed_ms {layer['exposed_ms']} != its parts {total}")
    for layer_b, layer_o in zip(blocking["moe"]["layers"], overlap["moe"]["layers"]):
        print(f"layer {layer_b['layer']}: exposed a2a {layer_b['exposed_ms']:.3f} ms blocking, "
              f"{layer_o['exposed_ms']:.3f} ms overlapped (of dispatch {layer_o['dispatch_ms']:.3f} + combine "
              f"{layer_o['combine_ms']:.3f} ms in flight)")
    print(f"losses {overlap['loss']}")
    if failures:
        sys.exit("FAIL: " + "\nFAIL: ".join(failures))
    print("PASS")


if __name__ == "__main__":
    main()
