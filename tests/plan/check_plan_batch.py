#!/usr/bin/env python3
"""plan never plans a batch nobody runs without saying so (issue 36): --search without
--global-batch prices a stated default (the model's trained batch, else 4M tokens per step),
every mode prints the global batch and every layout its micro-batch size, the search adds the
micro-batch counts a large batch needs, and a search where nothing forms says whether the batch
or the micro-batch list stopped it (exit 2, naming the flag), keeping exit 3 for memory.

    check_plan_batch.py PARBENCH OUT_DIR
"""
import json
import os
import subprocess
import sys
import time

failures = []


def plan(binary, out, name, args, status):
    """The run's JSON document (None when it wrote none), console text and stderr; its exit
    status must be `status`."""
    path = os.path.join(out, name + ".json")
    if os.path.exists(path):
        os.remove(path)
    started = time.monotonic()
    result = subprocess.run([binary, "plan"] + args + ["--json", path], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    if result.returncode != status:
        failures.append(f"{name}: exit {result.returncode} (wanted {status}): {result.stderr.strip()!r}")
    document = json.load(open(path)) if os.path.exists(path) else None
    return document, result.stdout, result.stderr, took


def check(condition, message):
    if not condition:
        failures.append(message)


def main():
    binary, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)

    # Llama 3 8B on 64 GPUs once planned one sequence per step without a word (12 % MFU, exit 0).
    document, stdout, _, _ = plan(binary, out, "llama3-8b-search", ["--model", "llama3-8b", "--gpus", "64", "--search",
                                                                     "--top", "3"], 0)
    if document:
        batch = document["inputs"]["batch"]
        check(batch["global_batch"] == 512 and "4M tokens" in batch["source"],
              f"llama3-8b --search: default batch {batch} (wanted 512 sequences of 8192, 4M tokens, stated)")
        check(all(x["layout"]["global_batch"] == 512 for x in document["layouts"]), "a layout priced another batch")
        check(all(" mbs" in x["label"] for x in document["layouts"]), "a layout label without its micro-batch size")
    check("# batch: 512 sequences per step" in stdout and "--global-batch not given" in stdout,
          f"llama3-8b --search does not print its batch and why: {stdout[:600]!r}")

    # A model config's own trained batch (GPT-3's 1536), named; exit 3 stays memory's.
    document, stdout, stderr, _ = plan(binary, out, "gpt3-search-8", ["--model", "gpt3-175b", "--gpus", "8", "--search"], 3)
    if document:
        batch = document["inputs"]["batch"]
        check(batch["global_batch"] == 1536 and "gpt3-175b.json" in batch["source"],
              f"gpt3-175b --search: default batch {batch} (wanted its config's 1536, naming the file)")
    check("memory" in stderr, f"exit 3 without naming memory: {stderr!r}")

    # DeepSeek-V3 with a batch of 1 once exited 3 advising to shard more: no dp divides it.
    _, stdout, stderr, took = plan(binary, out, "deepseek-batch-1", ["--model", "deepseek-v3", "--gpus", "2048",
                                                                     "--search", "--global-batch", "1"], 2)
    lines = [line for line in stderr.splitlines() if line.strip()]
    check(len(lines) == 1 and "--global-batch 1" in lines[0] and "not a memory limit" in lines[0] and not stdout,
          f"deepseek-v3 --global-batch 1: wanted one line naming --global-batch and not memory, got {stderr!r}")
    check(took < 10, f"deepseek-v3 --global-batch 1: refused after {took:.1f} s")

    # A batch the default micro-batch counts cannot cut into micro-batches that fit: 960 sequences
    # on 8 GPUs are 120 per dp rank, one at a time only as 120 micro-batches (not in 1..512's
    # powers of two). The search adds those counts; the old list finds nothing that fits.
    batch_960 = ["--model", "llama3-8b", "--gpus", "8", "--global-batch", "960", "--search", "--top", "400"]
    document, _, _, _ = plan(binary, out, "llama3-8b-960", batch_960, 0)
    if document:
        shapes = {(x["layout"]["microbatches"], x["layout"]["microbatch_size"]) for x in document["layouts"]}
        check((120, 1) in shapes, f"960 on 8 GPUs: no layout of 120 micro-batches of 1 ({sorted(shapes)[:8]})")
    plan(binary, out, "llama3-8b-960-list", batch_960 + ["--microbatch-list", "1,2,4,8,16,32,64,128,256,512"], 3)

    # A list none of whose counts divides the batch: the list named, not memory.
    _, _, stderr, _ = plan(binary, out, "list-3", ["--model", "llama3-8b", "--gpus", "64", "--global-batch", "512",
                                                   "--search", "--microbatch-list", "3"], 2)
    check("--microbatch-list" in stderr and "not a memory limit" in stderr and len(stderr.strip().splitlines()) == 1,
          f"--microbatch-list 3: {stderr!r}")

    # One layout: its batch, why, and the micro-batch size.
    _, stdout, _, _ = plan(binary, out, "one-layout", ["--model", "llama3-70b", "--gpus", "256", "--tp", "8", "--pp", "4",
                                                       "--microbatches", "8", "--sp"], 0)
    check("# batch: 64 sequences per step" in stdout and "dp x --microbatches" in stdout and "micro-batch 1)" in stdout,
          f"one layout does not print its batch, why and its micro-batch size: {stdout[:800]!r}")

    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        sys.exit(1)
    print("ok: every plan states its batch and micro-batch size; nothing-forms names the batch or the list")


if __name__ == "__main__":
    main()
