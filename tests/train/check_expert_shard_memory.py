#!/usr/bin/env python3
"""Runs one `parbench train` command line of an MoE model at --ep 1, 2 and 4 and checks that the
memory ledger holds 1/ep of the routed experts' parameters, gradients and optimizer states.

    check_expert_shard_memory.py --out DIR -- CMD...

The routed experts' parameter count X comes from the report's model shape (E experts of three
SwiGLU matrices Fe x C in each MoE layer), independently of train's layout; ep 1's ledger
holds the dense parameters D and X, so under expert parallelism a rank must hold D + X/ep:
its experts' bytes (ledger minus D) are 1/2 and 1/4 of ep 1's at ep 2 and 4, on every rank.
CMD must be a DDP run (no ZeRO padding) on 4 ranks.
"""
import argparse
import json
import os
import subprocess
import sys

FLOAT_BYTES = 4
# Ledger categories and how many copies of the parameters each holds under DDP with AdamW.
COPIES = {"params": 1, "grads": 1, "optimizer": 2}


def run(command, ep, out_dir):
    report = os.path.join(out_dir, f"expert_shard_ep{ep}.json")
    if os.path.exists(report):
        os.remove(report)
    full = command + ["--ep", str(ep), "--json", report]
    done = subprocess.run(full, capture_output=True, text=True, timeout=240)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(full)} exited {done.returncode}\n{done.stdout}{done.stderr}")
    with open(report) as f:
        return json.load(f)["results"][0]


def routed_expert_parameters(shape):
    moe = shape["moe"]
    moe_layers = sum(1 for layer in range(shape["layers"])
                     if layer >= moe["first_dense"] and (layer - moe["first_dense"]) % moe["every"] == 0)
    return moe_layers * moe["experts"] * 3 * moe["expert_hidden"] * shape["hidden"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command and args.command[0] == "--" else args.command
    results = {ep: run(command, ep, args.out) for ep in (1, 2, 4)}
    if results[1]["layout"].get("scheme") != "ddp":
        sys.exit(f"FAIL: the command must run DDP, it ran {results[1]['layout'].get('scheme')}")
    expert_bytes = routed_expert_parameters(results[1]["model"]["shape"]) * FLOAT_BYTES
    if expert_bytes == 0:
        sys.exit("FAIL: the model has no routed experts")
    failures = []
    for category, copies in COPIES.items():
        whole = results[1]["memory_bytes"][category]
        dense = whole - copies * expert_bytes
        for ep in (2, 4):
            for rank, memory in enumerate(results[ep]["memory_bytes_by_rank"]):
                held = memory[category] - dense
                line = f"{category} ep {ep} rank {rank}: experts {held} B of ep 1's {copies * expert_bytes} B"
                print(line)
                if held * ep != copies * expert_bytes:
                    failures.append(line + f" (want 1/{ep})")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print("ok: the ledger holds 1/ep of the routed experts' parameters, gradients and optimizer states")


if __name__ == "__main__":
    main()
