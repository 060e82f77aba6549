#!/usr/bin/env python3
"""nccl-tests' command lines run unchanged on parbench: those of nccl-tests' README and of the
cluster scripts people keep (each line below says where it comes from). A line parbench can
run is validated (its sizes are a cluster's, so most are checked with --dry-run, which parses
and validates every flag exactly as a run does); a few are run at 2 ranks, their reports
read back; a line with a flag parbench has no meaning for is refused in one line that names
the nccl-tests flag and says what to use, with exit status 2.

Usage: command_lines.py --parbench BIN --mpiexec MPIEXEC --schema SCHEMA
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import jsonschema

# nccl-tests' binary -> parbench's command.
COMMANDS = {"all_reduce_perf": "allreduce", "all_gather_perf": "allgather", "reduce_scatter_perf": "reducescatter",
            "broadcast_perf": "broadcast", "reduce_perf": "reduce", "alltoall_perf": "alltoall",
            "sendrecv_perf": "sendrecv", "gather_perf": "gather", "scatter_perf": "scatter"}

VALID, REFUSED = "valid", "refused"
# (where the line comes from, binary, its flags as written, what parbench does, what a refusal names)
LINES = [
    ("nccl-tests README: one node, 8 GPUs", "all_reduce_perf", "-b 8 -e 128M -f 2 -g 8", REFUSED, "-g (--ngpus) 8"),
    ("nccl-tests README: mpirun -np 64 -N 8, one GPU per process", "all_reduce_perf", "-b 8 -e 8G -f 2 -g 1", VALID, ""),
    ("nccl-tests README before 2.19: mpirun -np 40, 4 GPUs each", "all_reduce_perf", "-b 8 -e 128M -f 2 -g 4", REFUSED,
     "-g (--ngpus) 4"),
    ("a fork's script (nccl_test.sh, PERF case, one thread)", "all_reduce_perf",
     "-b 8K -e 8K -f 2 -t 1 -g 1 -n 4 -w 2 -c 0 -m 4", VALID, ""),
    ("the same script with a thread per GPU", "all_reduce_perf", "-b 8K -e 8K -f 2 -t 8 -g 1 -n 4 -w 2 -c 0 -m 4",
     REFUSED, "-t (--nthreads) 8"),
    ("a batch script over every *_perf binary", "all_gather_perf", "-b 8 -e 1M -f 2 -g 8", REFUSED, "-g (--ngpus) 8"),
    ("acceptance: every size checked, 100 iterations", "all_reduce_perf", "-b 8 -e 8G -f 2 -g 1 -c 1 -n 100", VALID, ""),
    ("acceptance: one large size, no check", "all_reduce_perf", "-b 1G -e 1G -w 5 -n 20 -c 0", VALID, ""),
    ("bandwidth soak, long form", "all_gather_perf", "-b 8M -e 8G -f 2 -g 1 -w 5 --iters 200 -c 0", VALID, ""),
    ("bf16 gradients, slowest rank", "all_reduce_perf", "-b 8 -e 8G -f 2 -g 1 -a 3 -d bfloat16 -o sum", VALID, ""),
    ("blocking with a timeout", "alltoall_perf", "-b 8 -e 1G -f 2 -g 1 -z 1 -T 60", VALID, ""),
    ("aggregated small messages", "sendrecv_perf", "-b 8 -e 128M -f 2 -g 1 -m 10", VALID, ""),
    ("every type and op", "reduce_scatter_perf", "-b 8 -e 128M -f 2 -g 1 -d all -o all", VALID, ""),
    ("fixed increments, every root", "broadcast_perf", "-b 1M -e 16M -i 1M -g 1 -r all", VALID, ""),
    ("CUDA graphs, misaligned buffers", "all_reduce_perf", "-b 8 -e 128M -f 2 -g 1 -G 100 -u 1", VALID, ""),
    ("long forms", "all_reduce_perf",
     "--minbytes 8 --maxbytes 128M --stepfactor 2 --ngpus 1 --datatype half --op all --warmup_iters 5 --iters 20 "
     "--check 1 --average 1 --blocking 0 --cudagraph 0 --output_file out.json --timeout 30 --memory 1 "
     "--per_iter_timing 1", VALID, ""),
    ("soak: the sweep again and again until stopped", "all_reduce_perf", "-b 8 -e 8G -f 2 -g 1 -N 0", VALID, ""),
    ("run-to-run noise: five whole sweeps, long form", "all_gather_perf", "-b 8 -e 1G -f 2 -g 1 --run_cycles 5",
     VALID, ""),
    ("registered buffers", "all_reduce_perf", "-b 8 -e 8G -f 2 -g 1 -R 1", REFUSED, "-R (--local_register) 1"),
    ("fp8", "all_reduce_perf", "-b 8 -e 8G -f 2 -g 1 -d f8e4m3", REFUSED, "-d/--dtype f8e4m3"),
    ("NCCL's pre-multiplied sum", "all_reduce_perf", "-b 8 -e 8G -f 2 -g 1 -o mulsum", REFUSED, "-o/--op mulsum"),
]


def check(condition, message):
    if not condition:
        raise AssertionError(message)


class Runner:
    def __init__(self, args):
        self.parbench = args.parbench
        self.mpiexec = args.mpiexec.split()
        self.schema = json.load(open(args.schema))
        self.tmp = tempfile.mkdtemp(prefix="parbench-nccl-tests-")

    def run(self, ranks, arguments, dry_run=False):
        command = [self.parbench] + (["--dry-run"] if dry_run else []) + arguments
        if ranks:
            command = self.mpiexec + ["-np", str(ranks)] + command
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=self.tmp)

    def report(self, name):
        report = json.load(open(os.path.join(self.tmp, name)))
        jsonschema.validate(report, self.schema)
        return report


def one_error_line(result, names):
    lines = result.stderr.strip().splitlines()
    check(result.returncode == 2, f"exit {result.returncode}, want 2: {result.stderr}")
    check(len(lines) == 1 and lines[0].startswith("error: "), f"one error line: {result.stderr!r}")
    check(names in lines[0], f"the error names {names!r}: {lines[0]}")


def every_line(runner):
    for source, binary, flags, expected, names in LINES:
        result = runner.run(0, [COMMANDS[binary]] + flags.split(), dry_run=True)
        if expected == VALID:
            check(result.returncode == 0 and "flags valid" in result.stdout,
                  f"{source}: {binary} {flags}: exit {result.returncode}: {result.stderr}")
        else:
            one_error_line(result, names)
        print(f"ok: {source}: {binary} {flags} -> {expected}")


def run_mapped_flags(runner):
    """The fork script's line at 2 ranks with -J: the report says what each flag meant."""
    flags = "-b 8K -e 8K -f 2 -t 1 -g 1 -n 4 -w 2 -c 0 -m 4 -a 3 -I 1 -J mapped.json".split()
    result = runner.run(2, ["allreduce"] + flags)
    check(result.returncode == 0, f"exit {result.returncode}: {result.stderr}")
    report = runner.report("mapped.json")
    config = report["config"]
    for entry in report["results"]:  # OSU's full statistics (-I 1 is --full), with the ranks
        full, per_rank = entry["full_statistics"], {r["rank"]: r["mean_us"] for r in entry["per_rank"]}
        fastest, slowest = full["fastest_rank_mean"], full["slowest_rank_mean"]
        check(math.isclose(fastest["time_us"], min(per_rank.values()), rel_tol=1e-9) and
              per_rank[fastest["rank"]] == min(per_rank.values()), f"t_min and its rank: {full}")
        check(math.isclose(slowest["time_us"], max(per_rank.values()), rel_tol=1e-9) and
              per_rank[slowest["rank"]] == max(per_rank.values()), f"t_max and its rank: {full}")
        check(full["p95"]["time_us"] == entry["samples_us"][full["p95_iteration"]], f"p95 is a sample: {full}")
    check(config["timing"] == "batched" and config["batch_size"] == 4, f"-m 4: {config['timing']}, {config['batch_size']}")
    check(config["aggregation"] == "rank-max", f"-a 3: {config['aggregation']}")
    check(config["check"] is False and config["check_runs"] == 0, "-c 0")
    check((config["iters"], config["warmup"], config["sizes"]) == (4, 2, [8192]), "-n 4 -w 2 -b 8K -e 8K")
    for said in ("# nccl-tests flag -m 4: --timing batched --batch-size 4", "# nccl-tests flag -a 3: --aggregate rank-max",
                 "t_min rank"):
        check(said in result.stdout, f"the console says {said!r}:\n{result.stdout}")
    print("ok: -m -a -c -I -J at 2 ranks")


def run_every_type_op_and_root(runner):
    """-d all -o all: every (type, op) in nccl-tests' order, avg left out for integer types (MPI has
    no integer average); -r all: every root; -c 2 validates twice per point."""
    result = runner.run(2, "reduce -b 64 -e 64 -g 1 -d all -o all -c 2 -n 2 -w 1 -J every.json".split())
    check(result.returncode == 0, f"exit {result.returncode}: {result.stderr}")
    report = runner.report("every.json")
    cases = []
    for entry in report["results"]:
        if (entry["dtype"], entry["op"]) not in cases:
            cases.append((entry["dtype"], entry["op"]))
    floating = ["float32", "float64", "float16", "bfloat16"]
    types = [entry["dtype"] for entry in report["results"]]
    check(sorted(set(types)) == sorted(floating + ["int8", "uint8", "int32", "uint32", "int64", "uint64"]), "every type")
    want = [(t, o) for t in dict.fromkeys(types) for o in ("sum", "prod", "max", "min", "avg") if o != "avg" or t in floating]
    check(cases == want, f"cases in order: {cases}")
    check(report["config"]["check_runs"] == 2 and all(e["wrong"] == 0 for e in report["results"]), "-c 2")
    check("# validation: 2 checked runs per size after timing" in result.stdout, f"-c 2 in the header:\n{result.stdout}")
    result = runner.run(2, "broadcast -b 1K -e 2K -i 1K -g 1 -r all -N 2 -n 2 -w 1 -J roots.json".split())
    check(result.returncode == 0, f"exit {result.returncode}: {result.stderr}")
    report = runner.report("roots.json")
    sweep = [(0, 1024), (0, 1024), (0, 2048), (0, 2048), (1, 1024), (1, 1024), (1, 2048), (1, 2048)]
    roots = [(e["root"], e["requested_bytes"]) for e in report["results"]]
    check(roots == sweep * 2, f"-r all with -i 1K, twice under -N 2: {roots}")
    check([e["repetition"] for e in report["results"]] == [1] * 8 + [2] * 8, "each point's sweep")
    repetitions = report["repetitions"]  # -N 2 is --repeat 2: each root's point its own, with both sweeps
    check((repetitions["requested"], repetitions["completed"]) == (2, 2), f"-N 2: {repetitions}")
    check(sorted((p["root"], p["bytes"], p["inplace"]) for p in repetitions["points"]) ==
          sorted((r, b, inplace) for r in (0, 1) for b in (1024, 2048) for inplace in (False, True)) and
          all(len(p["time_us"]) == 2 for p in repetitions["points"]), f"one point per root and size: {repetitions}")
    check("# nccl-tests flag -N 2: --repeat 2" in result.stdout and "run-to-run spread over 2 sweeps" in result.stdout,
          f"-N 2 on the console:\n{result.stdout}")
    print("ok: -d all -o all -c 2, -r all -i -N 2")


def run_refused_at_start(runner):
    """-G needs a GPU: refused once the device is known, naming -G, not a flag the user never gave."""
    result = runner.run(0, "allreduce -b 8 -e 128M -f 2 -g 1 -G 100".split())
    one_error_line(result, "-G (nccl-tests' --cudagraph)")
    print("ok: -G on a CPU run")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--schema", required=True)
    runner = Runner(parser.parse_args())
    every_line(runner)
    run_mapped_flags(runner)
    run_every_type_op_and_root(runner)
    run_refused_at_start(runner)
    return 0


if __name__ == "__main__":
    sys.exit(main())
