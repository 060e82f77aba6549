#!/usr/bin/env python3
"""Every report parbench writes validates against its schema, for every command.

The commands are read from `parbench --help`, and each command's output flags (--json,
--trace, --csv) from its own --help: a command, or an output flag, this suite does not run
fails it, so a new one cannot write unchecked files. Each command runs small, as a user would
(collectives alone, `all`, train, pairs and info under mpirun at 2 ranks), and every file it
wrote is validated: parbench.report/v1 (schemas/report.schema.json), parbench.plan/v1,
Chrome traces (trace.schema.json), parbench.info/v1; CSV files are read back whole.

Usage: report_schemas.py --parbench BIN --mpiexec MPIEXEC
"""
import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMAS = {name: os.path.join(ROOT, "schemas", f"{name}.schema.json") for name in ("report", "plan", "trace", "info")}
COLLECTIVES = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "gather", "scatter",
               "sendrecv"]
# command -> (ranks, 0: no launcher; arguments; {output flag: schema, or "csv"})
RUNS = {name: (0, [name, "--size", "1K", "--iters", "2", "--warmup", "0"], {"--json": "report", "--csv": "csv"})
        for name in COLLECTIVES}
RUNS.update({
    # At 2 ranks with a skew, so the imbalance fields the report then carries are checked too.
    "alltoallv": (2, ["alltoallv", "--size", "1K", "--iters", "2", "--warmup", "0", "--skew", "zipf:1"],
                  {"--json": "report", "--csv": "csv"}),
    "all": (2, ["all", "-b", "8", "-e", "1K", "-f", "32", "--iters", "2", "--warmup", "0"],
            {"--json": "report", "--csv": "csv"}),
    "train": (2, ["train", "--model", "gpt-tiny", "--pp", "2", "--microbatches", "2", "--steps", "1", "--warmup", "0",
                  "--quiet"],
              {"--json": "report", "--trace": "trace"}),
    "pairs": (2, ["pairs", "--size", "64K", "--iters", "2", "--latency-iters", "2", "--warmup", "0"],
              {"--json": "report"}),
    "plan": (0, ["plan", "--params", "125M", "--gpus", "8"], {"--json": "plan"}),
    "info": (2, ["info"], {"--json": "info"}),
    "moe-dispatch": (2, ["moe-dispatch", "--tokens", "64", "--hidden", "64", "--topk", "2", "--experts", "4",
                         "--skew", "zipf:1", "--iters", "2", "--warmup", "0"],
                     {"--json": "report"}),
})
WRITES_NOTHING = {"compare": "prints its table and verdict; it reads reports and writes none"}
OUTPUT_FLAGS = ("--json", "--trace", "--csv")


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def subcommands(parbench):
    text = subprocess.run([parbench, "--help"], capture_output=True, text=True, timeout=60).stdout
    listed = text.split("Subcommands:", 1)[1] if "Subcommands:" in text else ""
    return [match.group(1) for match in re.finditer(r"^  ([a-z][a-z0-9-]*)\s", listed, re.MULTILINE)]


def output_flags(parbench, command):
    text = subprocess.run([parbench, command, "--help"], capture_output=True, text=True, timeout=60).stdout
    # An option line taking a file name ("  --json TEXT  ..."), not a mention in a description
    # or compare's --csv switch (which prints CSV).
    return {flag for flag in OUTPUT_FLAGS if re.search(rf"^\s+(?:-\w+,)?{flag} TEXT", text, re.MULTILINE)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--mpiexec", required=True)
    args = parser.parse_args()
    args.parbench = os.path.abspath(args.parbench)
    validators = {name: jsonschema.Draft202012Validator(json.load(open(path))) for name, path in SCHEMAS.items()}
    tmp = tempfile.mkdtemp(prefix="parbench-reports-")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    files = 0
    try:
        commands = subcommands(args.parbench)
        check(commands, "no subcommands in parbench --help")
        unknown = [c for c in commands if c not in RUNS and c not in WRITES_NOTHING]
        check(not unknown, f"commands this suite does not run: {unknown}; add them to RUNS (with every file they "
                           "write) or WRITES_NOTHING")
        check(not [c for c in list(RUNS) + list(WRITES_NOTHING) if c not in commands],
              f"commands gone from parbench --help: {[c for c in RUNS if c not in commands]}")
        for command in commands:
            flags = output_flags(args.parbench, command)
            if command in WRITES_NOTHING:
                check(not flags, f"{command} has {sorted(flags)}, but is listed as writing nothing")
                print(f"{command}: writes no file ({WRITES_NOTHING[command]})")
                continue
            ranks, arguments, outputs = RUNS[command]
            check(flags == set(outputs), f"{command} writes with {sorted(flags)}; the suite runs {sorted(outputs)}")
            paths = {flag: os.path.join(tmp, f"{command}{flag.replace('--', '-')}.{'csv' if kind == 'csv' else 'json'}")
                     for flag, kind in outputs.items()}
            launcher = args.mpiexec.split() + ["-np", str(ranks)] if ranks else []
            line = launcher + [args.parbench, *arguments] + [part for flag, path in paths.items() for part in (flag, path)]
            result = subprocess.run(line, capture_output=True, text=True, timeout=240, env=env, cwd=tmp,
                                    stdin=subprocess.DEVNULL)
            check(result.returncode == 0, f"{command}: exit {result.returncode}: {result.stderr[-2000:]}")
            for flag, path in paths.items():
                kind = outputs[flag]
                check(os.path.exists(path), f"{command} {flag}: no file written")
                if kind == "csv":
                    rows = list(csv.reader(open(path)))
                    check(len(rows) >= 2 and all(len(row) == len(rows[0]) for row in rows),
                          f"{command} --csv: {len(rows)} rows of uneven width")
                    print(f"{command} {flag}: {len(rows) - 1} rows")
                else:
                    document = json.load(open(path))
                    errors = sorted(validators[kind].iter_errors(document), key=lambda e: list(e.absolute_path))
                    check(not errors, f"{command} {flag} breaks {kind}.schema.json: " +
                          "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errors[:3]))
                    if kind == "report":
                        check(document["command"] == command and document["status"] == "complete",
                              f"{command}: command {document['command']}, status {document['status']}")
                    print(f"{command} {flag}: valid against {kind}.schema.json")
                files += 1
    except AssertionError as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"passed: {files} files from {len(RUNS)} commands valid; {len(WRITES_NOTHING)} command writes none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
