#!/usr/bin/env python3
"""`parbench plan` as a user runs it: bad input exits 2 with one line naming the flag; one
layout, --search, --markdown and --json work, and the JSON follows schemas/plan.schema.json.

    check_plan_cli.py PARBENCH OUT_DIR [SECONDS]

SECONDS bounds each plan run (120 by default; sanitizer builds, whose allocation stack traces
make the search many times slower, give more).
"""
import json
import os
import subprocess
import sys

import jsonschema

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schemas", "plan.schema.json")


def run(binary, args):
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 120
    return subprocess.run([binary, "plan"] + args, capture_output=True, text=True, timeout=seconds)


def main():
    binary, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    failures = []
    bad = [
        (["--model", "gpt3-175b", "--gpus", "64", "--tp", "16"], "--tp 16"),
        (["--model", "gpt3-175b", "--gpus", "64", "--tp", "5", "--allow-cross-host-tp"], "--tp 5"),
        (["--model", "gpt3-175b", "--gpus", "64", "--dp", "3"], "--dp 3"),
        (["--model", "gpt3-175b", "--gpus", "64", "--device", "V99"], "--device"),
        (["--model", "gpt3-175b", "--gpus", "64", "--states", "bytes"], "--states"),
        (["--model", "gpt3-175b", "--gpus", "64", "--recompute", "half"], "--recompute"),
        (["--model", "gpt3-175b", "--gpus", "64", "--pp", "2", "--schedule", "zb-h1", "--microbatches", "4",
          "--recompute", "full", "--states", "parbench"], "--recompute full"),
        (["--model", "gpt3-175b", "--gpus", "64", "--cores-per-host", "0"], "--cores-per-host"),
        (["--model", "no-such-model", "--gpus", "8"], "no-such-model"),
        (["--params", "lots", "--gpus", "8"], "--params"),
        (["--gpus", "8"], "--model"),
        (["--model", "gpt3-175b", "--gpus", "64", "--calibrate", os.path.join(out, "missing.json")], "missing.json"),
        (["--model", "gpt3-175b", "--gpus", "64", "--pp", "8", "--microbatches", "4", "--schedule", "interleaved",
          "--virtual-stages", "2"], "--microbatches"),
        (["--model", "gpt3-175b", "--gpus", "64", "--global-batch", "3"], "--global-batch"),
        (["--model", "llama3-8b", "--gpus", "64", "--cp-style", "alltoall"], "--cp-style"),
        (["--model", "llama3-8b", "--gpus", "64", "--cp", "3"], "--cp 3"),
        (["--model", "llama3-8b", "--gpus", "64", "--cp", "4", "--cp-balance", "sideways"], "--cp-balance"),
    ]
    not_collective = os.path.join(out, "not-collective.json")
    with open(not_collective, "w") as handle:
        json.dump({"schema": "parbench.report/v1", "command": "train", "results": []}, handle)
    bad.append((["--model", "gpt3-175b", "--gpus", "64", "--calibrate", not_collective], "--calibrate"))
    # The compute model's and FSDP's flags.
    bad.extend([
        (["--model", "gpt3-175b", "--gpus", "64", "--attention", "fast"], "--attention"),
        (["--model", "gpt3-175b", "--gpus", "64", "--efficiency", "0.4", "--gemm-curve", not_collective],
         "--gemm-curve"),
        (["--model", "gpt3-175b", "--gpus", "64", "--gemm-curve", not_collective], "--gemm-curve"),
        (["--model", "gpt3-175b", "--gpus", "64", "--stage-layers", "48,48"], "--stage-layers"),
        (["--model", "gpt3-175b", "--gpus", "64", "--pp", "2", "--microbatches", "2", "--stage-layers", "40,40"],
         "--stage-layers"),
        (["--model", "gpt3-175b", "--gpus", "64", "--no-reshard", "--states", "zero"], "--no-reshard"),
        (["--model", "gpt3-175b", "--gpus", "64", "--tp", "8", "--zero", "3", "--hybrid-shard", "--states", "zero"],
         "--hybrid-shard"),
        # Tensor-parallel overlap: sequence parallelism's collectives, a framework's job, GEMM times.
        (["--model", "gpt3-175b", "--gpus", "64", "--tp", "8", "--tp-comm-overlap"], "--tp-comm-overlap"),
        (["--model", "gpt-small", "--gpus", "2", "--tp", "2", "--sp", "--tp-comm-overlap", "--states", "parbench"],
         "--tp-comm-overlap"),
        (["--model", "gpt3-175b", "--gpus", "64", "--tp", "8", "--sp", "--tp-comm-overlap", "--efficiency", "0.5"],
         "--tp-comm-overlap"),
        # How the overlapped GEMMs share the SMs says nothing without the overlap.
        (["--model", "gpt3-175b", "--gpus", "64", "--tp", "8", "--sp", "--tp-comm-shared-sms"], "--tp-comm-shared-sms"),
        # FP8 linear layers: a device with FP8 tensor cores, a framework's bf16 job.
        (["--model", "gpt3-175b", "--gpus", "64", "--device", "A100", "--fp8"], "--fp8"),
        (["--model", "gpt-small", "--gpus", "2", "--fp8", "--states", "parbench"], "--fp8"),
        # torchtitan's op-level checkpointing: priced for a dense Llama at tp 1 in 16 bits, given the layout.
        (["--model", "llama3-8b", "--gpus", "8", "--device", "H100", "--fp8", "--recompute", "selective-op"],
         "--recompute selective-op with --fp8"),
        (["--model", "llama3-8b", "--gpus", "8", "--search", "--recompute", "selective-op"], "--recompute selective-op"),
        (["--model", "gpt3-175b", "--gpus", "64", "--recompute", "selective-op"], "--recompute selective-op"),
        # Eager element-wise ops: torchtitan's dense Llama code, a framework's job, at the device's bandwidth.
        (["--model", "gpt3-175b", "--gpus", "64", "--eager"], "--eager"),
        (["--model", "llama-tiny", "--gpus", "2", "--eager", "--states", "parbench"], "--eager"),
        (["--model", "llama3-8b", "--gpus", "8", "--eager", "--efficiency", "0.5"], "--eager"),
    ])
    for args, needle in bad:
        result = run(binary, args)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        if result.returncode != 2 or len(lines) != 1 or needle not in lines[0] or not lines[0].startswith("error:"):
            failures.append(f"{args}: exit {result.returncode}, stderr {result.stderr!r} (wanted exit 2, one line "
                            f"naming {needle!r})")

    schema = json.load(open(SCHEMA))
    good = [
        # Micro-batch 3 (32 of them): at 6 the first stage holds 75 GiB, beyond the 71.4 GiB a
        # framework's job can use of an 80 GiB H100 (memory_reserved_gib), and plan exits 3.
        ("one", ["--model", "gpt3-175b", "--gpus", "1024", "--tp", "8", "--pp", "8", "--sp", "--zero", "1",
                 "--microbatches", "32", "--global-batch", "1536", "--states", "megatron", "--recompute", "selective"]),
        ("interleaved", ["--model", "megatron-76.1b", "--gpus", "512", "--tp", "8", "--pp", "4", "--schedule",
                         "interleaved", "--virtual-stages", "3", "--microbatches", "16", "--global-batch", "512",
                         "--states", "zero", "--fbw", "1,2,0", "--sp", "--recompute", "selective"]),
        ("parbench", ["--model", "gpt-small", "--gpus", "2", "--zero", "3", "--prefetch", "--overlap",
                      "--global-batch", "8", "--precision", "fp32"]),
        ("context", ["--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--cp", "4", "--pp", "2",
                     "--microbatches", "8", "--global-batch", "16", "--states", "megatron"]),
        # 4 ranks on one host of 2 cores: each computes at half the rate, and the plan says so.
        ("oversubscribed", ["--model", "gpt-small", "--gpus", "4", "--gpus-per-host", "4", "--cores-per-host", "2",
                            "--global-batch", "8", "--precision", "fp32", "--recompute", "selective"]),
        ("search", ["--params", "7.5B", "--gpus", "64", "--search", "--global-batch", "512", "--states", "zero",
                    "--top", "3"]),
    ]
    for name, args in good:
        path = os.path.join(out, name + ".json")
        result = run(binary, args + ["--json", path])
        if result.returncode != 0:
            failures.append(f"{args}: exit {result.returncode}: {result.stderr}")
            continue
        document = json.load(open(path))
        try:
            jsonschema.validate(document, schema)
        except jsonschema.ValidationError as error:
            failures.append(f"{name}: does not follow schemas/plan.schema.json: {error.message}")
        layouts = document["layouts"]
        if not layouts:
            failures.append(f"{name}: no layouts")
            continue
        first = layouts[0]
        time = first["time_ms"]
        parts = time["compute"] + time["bubble"] + time["optimizer"] + time["exposed_tp"] + time["exposed_dp"] + \
            time["exposed_pp"] + time.get("exposed_cp", 0.0) + time.get("exposed_ep", 0.0) + \
            time.get("overlap_slowdown", 0.0)
        if abs(parts - time["step"]) > 1e-6 * time["step"]:
            failures.append(f"{name}: step {time['step']} is not the sum of its parts {parts}")
        if name == "search":
            ranked = [layout["time_ms"]["step"] for layout in layouts]
            if ranked != sorted(ranked) or len(layouts) > 3 or "search" not in document:
                failures.append(f"search: not the top 3 by step time: {ranked}")
            if document["search"]["considered"] < document["search"]["fit"]:
                failures.append("search: more fit than were considered")
        if name == "interleaved" and first["bubble"]["simulated"] <= 0:
            failures.append("interleaved: no simulated bubble")
        sharing = first["compute_sharing"]
        if (sharing["oversubscribed"], sharing["share"]) != ((True, 0.5) if name == "oversubscribed" else (False, 1)):
            failures.append(f"{name}: compute sharing {sharing}")
        if name == "oversubscribed" and "OVERSUBSCRIBED: 4 ranks per host on 2 cores" not in result.stdout:
            failures.append("oversubscribed: the console does not mark the prediction: " + result.stdout)
        if "uncalibrated" not in document["inputs"]["compute"]["source"]:
            failures.append(f"{name}: the compute rate does not say it is uncalibrated")
    # --tp-comm-overlap hides part of the sequence-parallel collectives behind their GEMMs, never all
    # of them (the last reduce-scatter chunk and the chunks' overheads stay exposed); the compute it
    # slows (the SMs Transformer Engine's communication takes) is in that exposed time, not in the
    # overlap slowdown (plan/tp_comm_overlap.hpp).
    overlap = ["--model", "gpt3-175b", "--gpus", "128", "--tp", "8", "--pp", "16", "--sp", "--zero", "1",
               "--microbatches", "16", "--global-batch", "16", "--states", "megatron", "--recompute", "selective"]
    times = {}
    for name, extra in (("exposed", []), ("overlapped", ["--tp-comm-overlap"])):
        path = os.path.join(out, "tp-" + name + ".json")
        result = run(binary, overlap + extra + ["--json", path])
        if result.returncode == 0:
            times[name] = json.load(open(path))["layouts"][0]["time_ms"]
        else:
            failures.append(f"tp overlap {name}: exit {result.returncode}: {result.stderr}")
    if len(times) == 2:
        exposed, overlapped = times["exposed"], times["overlapped"]
        if not (0 < overlapped["exposed_tp"] < exposed["exposed_tp"]) or \
                overlapped["overlap_slowdown"] != exposed["overlap_slowdown"] or overlapped["compute"] != exposed["compute"]:
            failures.append(f"--tp-comm-overlap: exposed tp {exposed['exposed_tp']} -> {overlapped['exposed_tp']}, "
                            f"slowdown {exposed['overlap_slowdown']} -> {overlapped['overlap_slowdown']}")
    # --fp8 runs the linear layers' GEMMs faster (H100: 1979 dense FP8 at its measured fraction)
    # and holds each weight's FP8 copy and transpose (2 B per parameter on the rank).
    fp8 = {}
    for name, extra in (("bf16", []), ("fp8", ["--fp8"])):
        path = os.path.join(out, "fp8-" + name + ".json")
        result = run(binary, ["--model", "llama3-8b", "--gpus", "8", "--global-batch", "16", "--zero", "3",
                              "--microbatches", "2", "--states", "megatron", "--recompute", "full"] + extra +
                     ["--json", path])
        if result.returncode == 0:
            fp8[name] = json.load(open(path))["layouts"][0]
        else:
            failures.append(f"--fp8 {name}: exit {result.returncode}: {result.stderr}")
    if len(fp8) == 2:
        if not fp8["fp8"]["time_ms"]["compute"] < fp8["bf16"]["time_ms"]["compute"]:
            failures.append("--fp8: the linear layers' GEMMs are no faster")
        extra_bytes = fp8["fp8"]["memory_bytes"]["buffers"] - fp8["bf16"]["memory_bytes"]["buffers"]
        if abs(extra_bytes - 2 * 8.03e9) > 0.01 * 2 * 8.03e9 or "fp8" not in fp8["fp8"]["label"]:
            failures.append(f"--fp8: {extra_bytes:.4g} B of FP8 weight copies (wanted 2 B per parameter), "
                            f"label {fp8['fp8']['label']!r}")
    markdown = run(binary, ["--params", "7.5B", "--gpus", "64", "--search", "--global-batch", "512", "--top", "2",
                            "--states", "zero", "--markdown"])
    if markdown.returncode != 0 or "| # | layout |" not in markdown.stdout:
        failures.append("--markdown: no table: " + markdown.stdout + markdown.stderr)
    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        sys.exit(1)
    print(f"ok: {len(bad)} refusals, {len(good)} plans, markdown")


if __name__ == "__main__":
    main()
