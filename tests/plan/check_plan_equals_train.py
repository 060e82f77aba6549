#!/usr/bin/env python3
"""plan == train: `parbench train` and `parbench plan` given the SAME flags (plan adds only --gpus,
train only --steps/--warmup/--json) must count the same bytes, exactly: the memory of the most
loaded rank per category (params, grads, optimizer, activations, total) against train's ledger,
and the traffic of every parallel dimension (calls and bytes per collective) against what train
counted, plus every pipeline rank's bytes sent, and every rank's compute passes of a step
(forward, input gradient, weight gradient, and the weight gradients run as W actions of their
own) against the schedule's counts for its stage. Under expert parallelism (--ep) the ep group's
calls and its counts' alltoall bytes are compared exactly, and its dispatch/combine alltoallv
bytes, which follow the routing, must lie between plan's (balanced routing) and ep times them.
Issue 21 item 10 was two defaults that differed
(plan's --precision was bf16, train's fp32; plan's --global-batch dp x micro-batches, train's
8), which a check that copies train's resolved settings into plan's flags cannot see; this one
gives both the user's flags and nothing more.

    check_plan_equals_train.py --parbench BIN --out DIR --mpiexec "mpirun ..." --ranks N [--cpu-host] -- FLAGS...
    check_plan_equals_train.py --parbench BIN --out DIR --mpiexec "mpirun ..." --random COUNT [--seed S]

--random draws COUNT layouts that train runs here (at most 4 ranks; dp, tp, pp, cp, ZeRO stage,
sp, recompute, schedule, virtual stages, micro-batches, overlap, prefetch, precision, --ep with
--moe-a2a-overlap or --moe-a2a-overlap-1f1b; GPT, Llama, MLP and mixture-of-experts tiny models), prints the seed first so a failure can be replayed, and fails on the first layout
where the two disagree. A layout train refuses (exit status 2, a rule this generator does not
know) is drawn again and counted apart; a refusal by plan of a layout train ran is a failure.
"""
import argparse
import json
import os
import random
import shlex
import subprocess
import sys

PIPE_GPT = {"kind": "gpt", "layers": 4, "hidden": 32, "heads": 2, "seq_len": 16, "vocab": 64}
PIPE_LLAMA = {"kind": "llama", "layers": 4, "hidden": 32, "heads": 4, "kv_heads": 2, "ffn_hidden": 80,
              "seq_len": 16, "vocab": 64, "rope_theta": 10000.0, "norm_eps": 1e-5}
# Layers 1 and 3 an MoE of 4 experts, top 2, with a shared expert (what train's MoE layer runs).
PIPE_LLAMA_MOE = dict(PIPE_LLAMA, moe={"experts": 4, "top_k": 2, "expert_hidden": 24, "shared_experts": 1,
                                       "first_dense": 1, "every": 2})
# The same in a GPT: GELU experts, no biases.
PIPE_GPT_MOE = dict(PIPE_GPT, moe={"experts": 4, "top_k": 2, "expert_hidden": 48, "shared_experts": 1,
                                   "first_dense": 1, "every": 2})
PIPE_MODELS = {"gpt": PIPE_GPT, "llama": PIPE_LLAMA, "llama-moe": PIPE_LLAMA_MOE, "gpt-moe": PIPE_GPT_MOE}


class Mismatch(Exception):
    pass


def run(command, timeout):
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def compare(args, ranks, flags, folder):
    """Runs both; returns None when train refused the flags, raises Mismatch on a difference."""
    os.makedirs(folder, exist_ok=True)
    train_json, plan_json = os.path.join(folder, "train.json"), os.path.join(folder, "plan.json")
    train = shlex.split(args.mpiexec) + ["-np", str(ranks), args.parbench, "train", "--warmup", "0", "--steps", "1",
                                         "--json", train_json] + flags
    trained = run(train, 300)
    if trained.returncode == 2:
        return None
    if trained.returncode != 0:
        raise Mismatch("train failed (" + str(trained.returncode) + "): " + " ".join(train) + "\n" +
                       trained.stdout[-2000:] + trained.stderr[-2000:])
    # --states parbench: a plan of parbench's own run. Without it, a bf16 plan on a GPU preset takes
    # the frameworks' mixed precision (issue 21 item 11), which is not what train allocates.
    plan = [args.parbench, "plan", "--gpus", str(ranks), "--states", "parbench", "--json", plan_json] + flags
    # train ran on this machine's CPUs; plan's default device is a GPU, whose backend attends
    # differently from 256 tokens on (theory/engine_attention.hpp): --cpu-host describes the host.
    if args.cpu_host:
        plan += ["--cores-per-host", str(os.cpu_count() or 1)]
    planned = run(plan, 120)
    if planned.returncode != 0:
        raise Mismatch("plan refused a layout train ran: " + " ".join(plan) + "\n" + planned.stdout + planned.stderr)
    result = json.load(open(train_json))["results"][0]
    predicted = json.load(open(plan_json))["layouts"][0]
    differences = []
    measured = result["memory_bytes"]
    for train_key, plan_key in [("params", "params"), ("grads", "grads"), ("optimizer", "optimizer"),
                                ("activations_peak", "activations"), ("total_peak", "total")]:
        if measured[train_key] != predicted["memory_bytes"][plan_key]:
            differences.append(f"memory {plan_key}: train's ledger {measured[train_key]} B, plan "
                               f"{predicted['memory_bytes'][plan_key]} B")
    layout = result["layout"]
    cp = layout.get("cp", 1)
    ep = layout.get("ep", 1)
    comm = result["comm"]
    stage = comm["reported_rank"]["pp"]
    by_rank = predicted["traffic_by_pp_rank"]
    if len(by_rank) != layout["pp"]:
        differences.append(f"plan gives {len(by_rank)} pipeline ranks' traffic for pp {layout['pp']}")
    else:
        ours = by_rank[stage]
        # Under --ep the routed experts' gradients go over the expert-data-parallel group (dp x cp / ep).
        extents = {"dp": layout["dp"] * cp, "tp": layout["tp"], "pp": layout["pp"], "cp": cp,
                   "edp": layout["dp"] * cp // ep if ep > 1 else 1}
        for dimension, extent in extents.items():
            if extent == 1:
                continue  # a group of one: train counts its no-op call, plan none
            counted = comm["dp_cp" if dimension == "dp" and cp > 1 else dimension]
            expected = ours.get(dimension, {})
            for op in sorted(set(expected) | set(counted)):
                p, t = expected.get(op, {"calls": 0, "bytes": 0}), counted.get(op, {"calls": 0, "bytes": 0})
                if p["calls"] != t["calls"] or p["bytes"] != t["bytes"]:
                    differences.append(f"{dimension} {op}: train counted {t['calls']} calls {t['bytes']} B, plan "
                                       f"{p['calls']} calls {p['bytes']} B")
        if ep > 1:
            # The MoE layers' exchanges: the calls and the counts' alltoall exactly; the alltoallv
            # bytes follow the routing (max(sent, received) per call), which plan takes balanced:
            # dropless, a rank sends exactly plan's rows and receives up to ep times as many.
            counted, expected = comm.get("ep", {}), ours.get("ep", {})
            for op in sorted(set(expected) | set(counted)):
                p, t = expected.get(op, {"calls": 0, "bytes": 0}), counted.get(op, {"calls": 0, "bytes": 0})
                if op == "alltoallv":
                    agree = p["calls"] == t["calls"] and p["bytes"] <= t["bytes"] <= ep * p["bytes"]
                else:
                    agree = p["calls"] == t["calls"] and p["bytes"] == t["bytes"]
                if not agree:
                    differences.append(f"ep {op}: train counted {t['calls']} calls {t['bytes']} B, plan "
                                       f"{p['calls']} calls {p['bytes']} B" +
                                       (" (its bytes must lie in [plan, ep x plan])" if op == "alltoallv" else ""))
        if layout["pp"] > 1:
            for rank in result["bubble"]["by_rank"]:
                sent = by_rank[rank["stage"]].get("pp", {}).get("send", {"bytes": 0})["bytes"]
                if sent != rank["p2p_bytes_sent"]:
                    differences.append(f"rank {rank['rank']} (stage {rank['stage']}) sent {rank['p2p_bytes_sent']} B, "
                                       f"plan {sent} B")
    # The schedule's F/B/W: every rank's passes as the engine ran them against plan's for its stage.
    passes = predicted["passes_by_pp_rank"]
    if len(passes) != layout["pp"]:
        differences.append(f"plan gives {len(passes)} pipeline ranks' passes for pp {layout['pp']}")
    else:
        for rank in result["passes_by_rank"]:
            ours = passes[rank["pp_rank"]]
            for key in ("forward", "input_grad", "weight_grad", "weight_grad_deferred"):
                if rank[key] != ours[key]:
                    differences.append(f"rank {rank['rank']} (stage {rank['pp_rank']}) ran {rank[key]} {key} passes, "
                                       f"plan {ours[key]}")
    if differences:
        raise Mismatch("\n  ".join(["flags: " + " ".join(flags)] + differences) + "\n$ " + " ".join(train) +
                       "\n$ " + " ".join(plan))
    return f"{predicted['label']}: memory {measured['total_peak']} B, equal per category, per dimension and in F/B/W passes"


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def draw(rng, folder):
    """One layout train can run on at most 4 ranks: (ranks, flags)."""
    ranks, flags = draw_layout(rng, folder)
    if rng.random() < 0.25:
        flags += ["--precision", "bf16"]  # bf16 matmul operand copies; fp32 is both commands' default
    return ranks, flags


def draw_layout(rng, folder):
    kind = rng.choice(["gpt", "gpt", "llama", "llama", "llama-moe", "gpt-moe", "mlp"])
    moe = kind.endswith("-moe")
    ranks = rng.choice([1, 2, 2, 2, 4, 4])
    flags = []
    if kind == "mlp":
        tp = rng.choice(divisors(ranks))
        dp = ranks // tp
        flags += ["--model", "mlp-tiny", "--tp", str(tp)]
        zero = rng.choice([0, 1, 2, 3])
        microbatches = rng.choice([1, 2])
        flags += ["--zero", str(zero), "--microbatches", str(microbatches)]
        flags += ["--global-batch", str(dp * microbatches * rng.choice([1, 2]))]
        if zero == 3 and rng.random() < 0.5:
            flags.append("--prefetch")
        if rng.random() < 0.3:
            flags.append("--overlap")
        return ranks, flags
    pp = rng.choice([1, 1, 2]) if ranks >= 2 else 1
    rest = ranks // pp
    tp = rng.choice(divisors(rest))
    cp = rng.choice(divisors(rest // tp)) if pp == 1 else 1
    dp = rest // tp // cp
    if pp > 1:
        path = os.path.join(folder, f"{kind}-pipe.json")
        with open(path, "w") as out:
            json.dump(PIPE_MODELS[kind], out)
        flags += ["--model", path]
    else:
        flags += ["--model", f"{kind}-tiny"]
    flags += ["--dp", str(dp), "--tp", str(tp), "--pp", str(pp)]
    if moe and dp > 1:
        ep = rng.choice([e for e in divisors(dp) if 4 % e == 0])  # 4 experts
        flags += ["--ep", str(ep)]
        if ep > 1 and rng.random() < 0.5:
            flags.append("--moe-a2a-overlap")  # each alltoallv as two halves: twice the calls
    if cp > 1:
        flags += ["--cp", str(cp), "--cp-style", rng.choice(["ring", "alltoall"]),
                  "--cp-balance", rng.choice(["zigzag", "none"])]
    sp = tp > 1 and rng.random() < 0.5
    if sp:
        flags.append("--sp")
    recompute = rng.choice(["none", "none", "selective", "full"])
    zero = rng.choice([0, 1]) if pp > 1 else rng.choice([0, 1, 2, 3])
    # --moe-a2a-overlap-1f1b, half the time train would take it (theory/moe_a2a_overlap_1f1b.hpp:
    # ep > 1, 1F1B, no halves, no full recompute; the pipe models hold an MoE layer on their first
    # stage): pairing moves the same bytes and runs the same passes.
    paired = (moe and pp > 1 and "--ep" in flags and flags[flags.index("--ep") + 1] != "1" and
              "--moe-a2a-overlap" not in flags and rng.random() < 0.5)
    if paired and recompute == "full":
        recompute = "selective"
    if pp > 1:
        schedule = "1f1b" if paired else rng.choice(["gpipe", "1f1b", "interleaved", "zb-h1"])
        if schedule == "zb-h1" and (sp or recompute == "full"):
            schedule = "1f1b"
        microbatches = rng.choice([2, 4])
        flags += ["--schedule", schedule]
        if schedule == "interleaved":
            flags += ["--virtual-stages", "2"]
        if rng.random() < 0.3:
            flags += ["--p2p", "blocking"]
    else:
        microbatches = rng.choice([1, 1, 2])
    flags += ["--zero", str(zero), "--recompute", recompute, "--microbatches", str(microbatches)]
    flags += ["--global-batch", str(dp * microbatches * rng.choice([1, 2]))]
    if paired:
        flags.append("--moe-a2a-overlap-1f1b")
    if pp == 1 and rng.random() < 0.3:
        flags.append("--overlap")
    if zero == 3 and pp == 1 and rng.random() < 0.5:
        flags.append("--prefetch")
    if zero >= 2 and rng.random() < 0.3:
        flags += ["--bucket-mb", "0.05"]
    return ranks, flags


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--ranks", type=int)
    parser.add_argument("--random", type=int, help="draw this many layouts train runs")
    parser.add_argument("--seed", type=int, help="for --random (default: drawn, printed)")
    parser.add_argument("--cpu-host", action="store_true",
                        help="plan a CPU host (--cores-per-host), as train runs here: needed where the choice of "
                             "attention depends on the backend (auto from 256 tokens)")
    parser.add_argument("flags", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    flags = args.flags[1:] if args.flags[:1] == ["--"] else args.flags
    try:
        if args.random is None:
            if args.ranks is None or not flags:
                print("give --ranks N and the flags after --, or --random COUNT")
                return 2
            summary = compare(args, args.ranks, flags, args.out)
            if summary is None:
                raise Mismatch("train refused the flags: " + " ".join(flags))
            print("ok: " + summary)
            return 0
        os.makedirs(args.out, exist_ok=True)
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
        print(f"seed {seed} (replay: --random {args.random} --seed {seed})", flush=True)
        rng = random.Random(seed)
        ran = refused = 0
        while ran < args.random:
            if refused > 4 * args.random:
                raise Mismatch(f"train refused {refused} drawn layouts: the generator no longer knows train's rules")
            ranks, flags = draw(rng, args.out)
            summary = compare(args, ranks, flags, os.path.join(args.out, f"layout{ran}"))
            if summary is None:
                refused += 1
                print(f"  refused by train (drawn again): -np {ranks} {' '.join(flags)}", flush=True)
                continue
            ran += 1
            print(f"{ran:3d} ok -np {ranks} {' '.join(flags)}\n      {summary}", flush=True)
        print(f"plan == train on {ran} random layouts (seed {seed}; {refused} drawn layouts refused by train)")
        return 0
    except Mismatch as mismatch:
        print("FAIL: " + str(mismatch))
        return 1


if __name__ == "__main__":
    sys.exit(main())
