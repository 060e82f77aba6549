#!/usr/bin/env python3
"""Property test of `parbench plan`: random flag combinations, inside and outside every flag's
valid range, run as a user runs them. Every run must either

  - exit 2 with exactly one line on stderr, "error: ...", naming a flag (or a --cluster /
    --calibrate file), and write no JSON; or
  - exit 0, or 3 when nothing fits in memory, with a JSON document that validates against
    schemas/plan.schema.json and a console report, neither holding a NaN, an infinity or a
    negative quantity.

Anything else (another exit status, a crash, a run over the time limit, a traceback-like
message, a second stderr line) fails the test, printing the seed and the flags to rerun it.

    plan_property_test.py PARBENCH OUT_DIR [--cases N] [--seed S] [--jobs J] [--seconds T]

The seed is printed first; pass it back with --seed to replay the same cases.
"""
import argparse
import concurrent.futures
import json
import math
import os
import random
import re
import subprocess
import sys
import time

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "..", "..", "schemas", "plan.schema.json")
CORPUS = os.path.join(HERE, "..", "fuzz", "corpus")

MODELS = ["gpt-tiny", "gpt-small", "gpt3-175b", "llama3-8b", "llama-tiny", "mlp-tiny", "megatron-7.5b", "gpt2-124m",
          "mixtral-8x7b"]
# Integers people give, and the ones a careless script or a fuzzer gives.
SMALL = [1, 2, 4, 8, 16]
WILD = [-5, -1, 0, 3, 7, 1000, 65537, 2**20, 2**20 + 1, 2**31 - 1, 2**31, 10**12, "1e3", "x", "2.5", ""]
FLOATS = ["nan", "inf", "-inf", "-1", "0", "1e-300", "0.3", "0.5", "1", "1.5", "1e308", "abc"]


def pick_int(rng, small=SMALL, wild_chance=0.15):
    return rng.choice(WILD) if rng.random() < wild_chance else rng.choice(small)


def cluster_files(out):
    """A few --cluster files: valid ones, and ones broken in the ways users break them."""
    files = {
        "preset": {"device": "H100", "gpus": 64, "gpus_per_host": 8},
        "cpu": {"device": {"name": "cpu", "peak_tflops_bf16": 0.05, "peak_tflops_fp32": 0.05, "memory_gib": 4,
                           "memory_bandwidth_gbps": 10, "intra_host": {"latency_us": 5, "busbw_gbps": 5},
                           "cross_host": {"latency_us": 50, "busbw_gbps": 1}},
                "gpus": 4, "gpus_per_host": 4, "cores_per_host": 2},
        "gpus-1e12": {"device": "H100", "gpus": 1e12},
        "gpus-half": {"device": "A100", "gpus": 0.5},
        "name-number": {"device": {"name": 5, "peak_tflops_bf16": 1, "memory_gib": 1,
                                   "intra_host": {"latency_us": 1, "busbw_gbps": 1},
                                   "cross_host": {"latency_us": 1, "busbw_gbps": 1}}, "gpus": 2},
        "typo": {"device": "H100", "gpus": 8, "gpu_per_host": 8},
    }
    paths = []
    for name, document in files.items():
        path = os.path.join(out, f"cluster-{name}.json")
        with open(path, "w") as handle:
            json.dump(document, handle)
        paths.append(path)
    return paths


def random_case(rng, clusters):
    """Half the cases are hostile (any flag may be out of range, malformed or contradictory); the
    other half tame (values in range, degrees that multiply to the GPUs), so that the plans
    themselves, not only the refusals, are exercised."""
    tame = rng.random() < 0.5
    wild = 0.0 if tame else 0.15

    def number(values):
        return pick_int(rng, values, wild)

    def word(values):
        return values[0] if tame and rng.random() < 0.5 else rng.choice(values[:-1] if tame else values)

    args = []
    # The model: a config, a parameter count, or shape flags.
    choice = rng.random()
    if choice < 0.55:
        args += ["--model", rng.choice(MODELS + ["no-such-model"] if not tame and rng.random() < 0.05 else MODELS)]
    elif choice < 0.8:
        count = rng.choice([f"{10 ** rng.uniform(7, 13):.3g}", "7.5B", "350M", "1.3B", "175B"] if tame else
                           [f"{10 ** rng.uniform(5, 31):.3g}", f"{rng.uniform(0.1, 999):.3g}{rng.choice('KMBT')}",
                            "7.5B", "350M", "1e20", "1e30", "nan", "-5B", "1e400", "lots"])
        args += ["--params", count]
    else:
        args += ["--layers", str(pick_int(rng, [1, 2, 4, 24, 96], 2 * wild)),
                 "--hidden", str(pick_int(rng, [128, 1024, 4096, 12288], 2 * wild))]
        if rng.random() < 0.3:
            args += ["--heads", str(pick_int(rng, [1, 8, 32], 2 * wild))]
        if rng.random() < 0.2:
            args += ["--vocab", str(pick_int(rng, [256, 51200], 2 * wild))]
    if rng.random() < 0.3:
        args += ["--seq", str(pick_int(rng, [64, 256, 2048, 8192], 3 * wild))]
    # The layout, and the machine.
    degrees = {}
    for flag, chance, values in [("--dp", 0.2, SMALL), ("--tp", 0.4, [1, 2, 4, 8]), ("--pp", 0.4, [1, 2, 4, 8]),
                                 ("--cp", 0.1, [1, 2, 4]), ("--zero", 0.4, [0, 1, 2, 3]),
                                 ("--microbatches", 0.4, [1, 2, 4, 8, 16, 64]), ("--virtual-stages", 0.15, [1, 2, 3]),
                                 ("--global-batch", 0.4, [64, 512, 1536, 4096]), ("--ep", 0.1, [1, 2, 4, 8])]:
        if rng.random() < chance:
            degrees[flag] = number(values)
            args += [flag, str(degrees[flag])]
    if rng.random() < (0.05 if tame else 0.15):
        args += ["--cluster", clusters[rng.choice([0, 1]) if tame else rng.randrange(len(clusters))]]
    else:
        if tame:
            product = 1
            for flag in ("--tp", "--pp", "--cp"):
                product *= degrees.get(flag, 1)
            args += ["--gpus", str(product * degrees.get("--dp", rng.choice([1, 2, 4, 8, 16, 64])))]
        elif rng.random() < 0.8:
            args += ["--gpus", str(number([1, 2, 4, 8, 16, 64, 256, 1024]))]
        if rng.random() < 0.2:
            args += ["--device", word(["H100", "A100", "H200", "B200", "V99"])]
        if rng.random() < 0.1:
            args += ["--gpus-per-host", str(number([8, 4, 16]))]
    if rng.random() < 0.1:
        args += ["--cores-per-host", str(number([1, 2, 64]))]
    for flag, chance, values in [("--schedule", 0.3, ["1f1b", "gpipe", "interleaved", "zb-h1", "zigzag"]),
                                 ("--states", 0.4, ["megatron", "zero", "parbench", "bytes"]),
                                 ("--recompute", 0.3, ["selective", "none", "full", "half", "selective-op"]),
                                 ("--precision", 0.3, ["bf16", "fp32", "fp8"]),
                                 ("--p2p", 0.1, ["nonblocking", "blocking", "carrier-pigeon"]),
                                 ("--cp-style", 0.05, ["ring", "alltoall", "diagonal"])]:
        if rng.random() < chance:
            args += [flag, word(values)]
    for flag, chance in [("--efficiency", 0.15), ("--bucket-mb", 0.1), ("--moe-imbalance", 0.05)]:
        if rng.random() < chance:
            args += [flag, rng.choice(["0.3", "0.5", "1"] if tame else FLOATS)]
    for flag, chance in [("--sp", 0.2), ("--overlap", 0.2), ("--prefetch", 0.1), ("--moe-a2a-overlap-1f1b", 0.05),
                         ("--eager", 0.05)]:
        if rng.random() < chance:
            args.append(flag)
    if rng.random() < 0.1:
        args += ["--fbw", ",".join(rng.choice(["1", "2", "0.5"] if tame else FLOATS[:8] + ["1", "2", "1"])
                                   for _ in range(3 if tame else rng.choice([2, 3, 3, 4])))]
    if rng.random() < 0.06:
        args += ["--calibrate", os.path.join(CORPUS, "calibration",
                                             rng.choice(["sweep-linear", "sweep-flat", "sweep-falling"]))]
    if rng.random() < 0.06:
        args += ["--calibrate-compute", os.path.join(CORPUS, "calibration",
                                                     rng.choice(["ops-report", "train-report", "train-negative"]))]
    if rng.random() < 0.05:
        # A search ranges over every layout: kept to small machines so the test stays fast.
        args = [a for a in args if a not in ("--search",)]
        args += ["--search", "--top", str(number([1, 3, 10]))]
        if not tame and rng.random() < 0.3:
            args += ["--microbatch-list", rng.choice(["1,2,4", "0,1", "8", "1,x", "70000"])]
    return args


FLAG = re.compile(r"--[a-z]")
NUMBER_WORDS = re.compile(r"(?<![A-Za-z_-])(nan|inf|infinity)(?![A-Za-z_])", re.IGNORECASE)


def bad_numbers(value, where="$"):
    """Paths of numbers in a JSON document that are NaN, infinite or negative."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += bad_numbers(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += bad_numbers(item, f"{where}[{index}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 0:
            found.append(f"{where} = {value}")
    return found


def check_case(binary, out, index, args, seconds, validator):
    """'' when the run keeps the property, else why not. Returns (failure, status)."""
    path = os.path.join(out, f"case-{index}.json")
    if os.path.exists(path):
        os.remove(path)
    command = [binary, "plan"] + args + ["--json", path]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        return f"ran over {seconds} s (a hang, or a search or allocation without a bound)", None
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if result.returncode == 2:
        if len(lines) != 1 or not lines[0].startswith("error: ") or not FLAG.search(lines[0]):
            return f"exit 2 without one line naming a flag: {result.stderr!r}", 2
        if os.path.exists(path):
            return "exit 2 but the JSON was written", 2
        return "", 2
    if result.returncode not in (0, 3):
        return f"exit {result.returncode}: {result.stderr.strip()!r}", result.returncode
    if result.returncode == 3 and not any("does not fit" in line or "no layout fits" in line for line in lines):
        return f"exit 3 without saying what does not fit: {result.stderr!r}", 3
    if any(line.startswith("error:") for line in lines):
        return f"exit {result.returncode} with an error line: {result.stderr!r}", result.returncode
    if NUMBER_WORDS.search(result.stdout):
        return f"the console holds nan or inf: {NUMBER_WORDS.search(result.stdout).group(0)!r} in {result.stdout[:400]!r}", \
            result.returncode
    if re.search(r"(?<![\w.])-\d", result.stdout.replace("--", "")):
        negative = re.search(r".*(?<![\w.])-\d.*", result.stdout.replace("--", "")).group(0)
        return f"the console holds a negative figure: {negative!r}", result.returncode
    try:
        with open(path) as handle:
            document = json.load(handle)
    except (OSError, ValueError) as error:
        return f"exit {result.returncode} but no readable JSON: {error}", result.returncode
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    if errors:
        return f"does not follow plan.schema.json: {errors[0].message} at {list(errors[0].path)}", result.returncode
    bad = bad_numbers(document)
    if bad:
        return f"NaN, infinite or negative numbers: {bad[:3]}", result.returncode
    fits = [layout["memory_bytes"]["fits"] for layout in document["layouts"]]
    if result.returncode == 3 and any(fits) and "search" not in document:
        return "exit 3 although the layout fits", 3
    if result.returncode == 0 and not all(fits):
        return "exit 0 although a layout does not fit", 0
    return "", result.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parbench")
    parser.add_argument("out")
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=30.0, help="limit of one run")
    options = parser.parse_args()
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed} (rerun: --seed {seed} --cases {options.cases})", flush=True)
    os.makedirs(options.out, exist_ok=True)
    rng = random.Random(seed)
    clusters = cluster_files(options.out)
    cases = [random_case(rng, clusters) for _ in range(options.cases)]
    validator = jsonschema.Draft202012Validator(json.load(open(SCHEMA)))
    failures, statuses = [], {}
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs) as pool:
        futures = {pool.submit(check_case, options.parbench, options.out, i, args, options.seconds, validator): i
                   for i, args in enumerate(cases)}
        for future in concurrent.futures.as_completed(futures):
            index = futures[future]
            failure, status = future.result()
            statuses[status] = statuses.get(status, 0) + 1
            if failure:
                failures.append((index, failure))
    for index, failure in sorted(failures):
        print(f"FAIL case {index}: parbench plan {' '.join(cases[index])}\n  {failure}")
    tally = ", ".join(f"exit {status}: {count}" for status, count in sorted(statuses.items(), key=lambda s: str(s[0])))
    print(f"{len(cases)} cases in {time.monotonic() - started:.0f} s ({tally}); {len(failures)} failed; seed {seed}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
