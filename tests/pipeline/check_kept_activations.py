#!/usr/bin/env python3
"""An interleaved run keeps no more activations than Megatron-LM's schedule does (issue 21 item 4).

Runs `parbench train --schedule interleaved` and reads its report. Megatron-LM's interleaved 1F1B
(arXiv 2104.04473 sec. 2.2) runs min((p-r-1)*2 + (v-1)*p, m*v) warm-up forwards on pipeline rank r
and holds one (micro-batch, chunk) more in steady state: on rank 0, p*v + p - 1 chunks of L/(p*v)
layers, L*(1 + (p-1)/(p*v)) layers (arXiv 2205.05198 sec. 4.2.3). Per stage it requires:

- the rank's pool of kept activations (pipeline.per_stage[].kept_activation_pool, which the model
  allocates and refuses to exceed) holds at most Megatron's count of layer stores and of slots
  (boundary input and gradient of one micro-batch on one chunk), and so, in the bytes the ledger
  measured for one layer's store, at most Megatron's bytes;
- the ledger follows the pool: between two stages that do not run the head, the measured
  activation peaks differ by exactly their pools' difference in layer stores and slots;
- on some stage the pool holds fewer layer stores than per-chunk pools would (the sum over its
  chunks of each chunk's own peak times its layers), which is what the shared pool saves.

    check_kept_activations.py --parbench BIN --mpiexec "mpirun ..." --out DIR --model CONFIG
                              --pp P --virtual-stages V --microbatches M
"""
import argparse
import json
import os
import shlex
import subprocess
import sys


def megatron_chunks_held(p, v, m, rank):
    warmup = min((p - rank - 1) * 2 + (v - 1) * p, m * v)
    return min(warmup + 1, m * v)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--pp", type=int, required=True)
    parser.add_argument("--virtual-stages", type=int, required=True)
    parser.add_argument("--microbatches", type=int, required=True)
    args = parser.parse_args()
    p, v, m = args.pp, args.virtual_stages, args.microbatches

    os.makedirs(args.out, exist_ok=True)
    report_path = os.path.join(args.out, f"kept_pp{p}_v{v}_m{m}.json")
    command = shlex.split(args.mpiexec) + [
        "-np", str(p), args.parbench, "train", "--model", args.model, "--pp", str(p), "--schedule", "interleaved",
        "--virtual-stages", str(v), "--microbatches", str(m), "--global-batch", str(m), "--warmup", "0",
        "--steps", "1", "--json", report_path]
    run = subprocess.run(command, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"), capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout + run.stderr)
        sys.exit(f"train exited {run.returncode}: {' '.join(command)}")
    with open(report_path) as f:
        result = json.load(f)["results"][0]

    shape = result["model"]["shape"]
    layers = shape["layers"]
    if layers % (p * v) != 0:
        sys.exit(f"{layers} layers do not cut into {p * v} equal chunks, which Megatron's count assumes")
    layers_per_chunk = layers // (p * v)
    # One slot: a micro-batch's input and its gradient on one chunk, (B, T, C) fp32 each.
    microbatch_size = result["global_batch"] // result["layout"]["dp"] // m
    slot_bytes = 2 * microbatch_size * result["seq_len"] * shape["hidden"] * 4
    store_bytes = result["activation_memory"]["measured_bytes_per_layer"]
    stages = result["pipeline"]["per_stage"]
    failures = []
    saved_somewhere = False
    for stage in stages:
        r = stage["stage"]
        pool = stage["kept_activation_pool"]
        stores = sum(pool["layer_stores"])
        chunk_layers = [end - first for first, end in stage["layers"]]
        per_chunk_pools = sum(held * n for held, n in zip(stage["microbatches_in_flight_peak"], chunk_layers))
        megatron_chunks = megatron_chunks_held(p, v, m, r)
        megatron_layers = megatron_chunks * layers_per_chunk
        pool_bytes = stores * store_bytes + pool["slots"] * slot_bytes
        megatron_bytes = megatron_layers * store_bytes + megatron_chunks * slot_bytes
        print(f"stage {r}: pool {pool['slots']} slots, {stores} layer stores ({pool_bytes} B); per-chunk pools "
              f"{per_chunk_pools} layer stores; Megatron {megatron_chunks} chunks, {megatron_layers} layers "
              f"({megatron_bytes} B); ledger activations {stage['activations_peak_bytes']} B")
        if stores > megatron_layers or pool["slots"] > megatron_chunks or pool_bytes > megatron_bytes:
            failures.append(f"stage {r} keeps more than Megatron's L(1 + (p-1)/(p v))-style count")
        if stores > per_chunk_pools:
            failures.append(f"stage {r}: the shared pool holds more than per-chunk pools would")
        saved_somewhere = saved_somewhere or stores < per_chunk_pools
    if not saved_somewhere:
        failures.append("no stage keeps fewer layer stores than per-chunk pools would")
    # The ledger follows the pool (stages without the head keep the same other buffers).
    without_head = [s for s in stages if s["kept_activation_pool"]["heads"] == 0]
    if all(len(s["kept_activation_pool"]["layer_stores"]) == 1 for s in without_head):
        base = without_head[0]
        for stage in without_head[1:]:
            a, b = stage["kept_activation_pool"], base["kept_activation_pool"]
            expected = (sum(a["layer_stores"]) - sum(b["layer_stores"])) * store_bytes + \
                (a["slots"] - b["slots"]) * slot_bytes
            measured = stage["activations_peak_bytes"] - base["activations_peak_bytes"]
            if measured != expected:
                failures.append(f"stage {stage['stage']} vs {base['stage']}: the ledger differs by {measured} B, "
                                f"the pools by {expected} B")
    for failure in failures:
        print("FAIL:", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
