#!/usr/bin/env python3
"""End-to-end tests of the collective commands: run the built binary as a user would,
read its JSON and CSV, check them against the schema and check that the figures are
consistent with each other and with nccl-tests' conventions.

Usage: collectives_e2e.py CASE --parbench BIN --mpiexec MPIEXEC --schema SCHEMA
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jsonschema

# nccl-tests' bus factors, written out independently of the C++ table.
BUS_FACTORS = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "alltoallv": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


class Context:
    def __init__(self, args):
        self.parbench = args.parbench
        self.mpiexec = args.mpiexec.split()
        self.schema = json.load(open(args.schema))
        self.tmp = tempfile.mkdtemp(prefix="parbench-e2e-")

    def path(self, name):
        return os.path.join(self.tmp, name)

    def run(self, ranks, *arguments, timeout=240, env=None):
        command = self.mpiexec + ["-np", str(ranks), self.parbench, *arguments] if ranks else [self.parbench, *arguments]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", **(env or {}))
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def load_report(ctx, path):
    report = json.load(open(path))
    jsonschema.validate(report, ctx.schema)
    return report


def check_consistent(report, ranks):
    check(report["environment"]["world_size"] == ranks, "world_size")
    iters = report["config"]["iters"]
    for entry in report["results"]:
        if "skipped" in entry:
            continue
        name = entry["collective"]
        check(len(entry["samples_us"]) == iters, f"{name}: {len(entry['samples_us'])} samples, want {iters}")
        samples = sorted(entry["samples_us"])
        middle = len(samples) // 2
        median = samples[middle] if len(samples) % 2 else (samples[middle - 1] + samples[middle]) / 2
        check(math.isclose(entry["time_us"]["median"], median, rel_tol=1e-9), f"{name}: median")
        check(entry["time_us"]["min"] == samples[0] and entry["time_us"]["max"] == samples[-1], f"{name}: min/max")
        check(len(entry["per_rank"]) == ranks, f"{name}: one per_rank entry per rank")
        # The reported time follows the aggregation: the median of the samples, or their mean.
        if entry["aggregation"] == "rank-mean":
            reported = sum(samples) / len(samples)
            per_rank_mean = sum(r["mean_us"] for r in entry["per_rank"]) / ranks
            check(math.isclose(reported, per_rank_mean, rel_tol=1e-9), f"{name}: rank-mean = mean of rank means")
        elif entry["aggregation"] == "rank-max":
            reported = max(r["mean_us"] for r in entry["per_rank"])
        elif entry["aggregation"] == "rank-min":
            reported = min(r["mean_us"] for r in entry["per_rank"])
        else:
            reported = median
        check(math.isclose(entry["reported_time_us"], reported, rel_tol=1e-9), f"{name}: reported time")
        check(math.isclose(entry["aggregates_us"][entry["aggregation"]], reported, rel_tol=1e-9), f"{name}: aggregates")
        if entry["aggregation"] == "max":
            # No rank's own median can exceed the median of per-iteration maxima.
            check(all(r["median_us"] <= median * (1 + 1e-9) for r in entry["per_rank"]), f"{name}: max >= ranks")
        algbw = entry["bytes"] / reported / 1e3
        check(math.isclose(entry["algbw_gbps"], algbw, rel_tol=1e-9), f"{name}: algbw {entry['algbw_gbps']} != {algbw}")
        factor = BUS_FACTORS[name](ranks)
        check(math.isclose(entry["bus_factor"], factor, rel_tol=1e-12), f"{name}: bus factor")
        check(math.isclose(entry["busbw_gbps"], algbw * factor, rel_tol=1e-9), f"{name}: busbw")
        check(entry["count"] * {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1,
                                 "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}[entry["dtype"]] == entry["bytes"],
              f"{name}: count x element size != bytes")


def case_all_report(ctx):
    for ranks in (2, 3):
        json_path, csv_path = ctx.path(f"all{ranks}.json"), ctx.path(f"all{ranks}.csv")
        result = ctx.run(ranks, "all", "-b", "8", "-e", "64K", "-f", "8", "--check", "--iters", "5", "--warmup",
                         "2", "--json", json_path, "--csv", csv_path)
        check(result.returncode == 0, f"exit {result.returncode}: {result.stderr}")
        report = load_report(ctx, json_path)
        check_consistent(report, ranks)
        names = {entry["collective"] for entry in report["results"]}
        check(names == set(BUS_FACTORS), f"collectives in report: {sorted(names)}")
        measured = [e for e in report["results"] if "skipped" not in e]
        check(all(e["wrong"] == 0 for e in measured), "wrong elements")
        check(report["finished_at"] is not None, "finished_at")
        rows = list(csv.DictReader(open(csv_path)))
        check(len(rows) == len(report["results"]), "csv rows")
        for row, entry in zip(rows, report["results"]):
            check(row["collective"] == entry["collective"] and int(row["bytes"]) == entry["bytes"], "csv row")
        # The console table shows one row per point, printed by one rank only.
        check(result.stdout.count("# method:") == 1, "header printed once")
        check(result.stdout.count("allreduce") >= 1, "rows printed")


def case_single_size(ctx):
    json_path = ctx.path("single.json")
    result = ctx.run(2, "allreduce", "--size", "1M", "--check", "--iters", "4", "--json", json_path)
    check(result.returncode == 0, result.stderr)
    report = load_report(ctx, json_path)
    check([(e["bytes"], e["placement"]) for e in report["results"]] == [(1 << 20, "out"), (1 << 20, "in")],
          "one size of 1 MiB, out of place and in place")
    check(report["argv"][1:] == ["allreduce", "--size", "1M", "--check", "--iters", "4", "--json", json_path], "argv")
    check_consistent(report, 2)


def case_rounding(ctx):
    json_path = ctx.path("rounded.json")
    result = ctx.run(3, "all", "--size", "100", "--iters", "2", "--check", "--json", json_path)
    check(result.returncode == 0, result.stderr)
    report = load_report(ctx, json_path)
    by_name = {e["collective"]: e for e in report["results"]}
    check(by_name["allgather"]["requested_bytes"] == 100 and by_name["allgather"]["bytes"] == 96, "allgather rounded")
    check(by_name["allreduce"]["bytes"] == 100, "allreduce kept 100 B")


def case_modes(ctx):
    for extra in (["--timing", "batched", "--batch-size", "4"], ["--inplace"], ["--dtype", "bfloat16", "--op", "avg"],
                  ["--dtype", "int8", "--op", "prod"], ["--dtype", "float16", "--op", "min", "--root", "2"],
                  ["--buffer-offsets", "8,20"], ["--buffer-offsets", "16", "--dtype", "float64"],
                  ["--buffer-offsets", "0,16:1024,1040:2048,2064"]):
        json_path = ctx.path("mode.json")
        result = ctx.run(3, "all", "-b", "96", "-e", "6K", "-f", "8", "--check", "--iters", "3", "--json",
                         json_path, *extra)
        check(result.returncode == 0, f"{extra}: {result.stderr}")
        report = load_report(ctx, json_path)
        check_consistent(report, 3)
        if "--inplace" in extra:
            skipped = [e for e in report["results"] if "skipped" in e]
            check({e["collective"] for e in skipped} == {"sendrecv", "alltoallv"},
                  "only sendrecv and alltoallv have no in-place form")
        if "batched" in extra:
            check(report["config"]["timing"] == "batched" and report["config"]["batch_size"] == 4, "batched config")
        if "--buffer-offsets" in extra:  # the buffers moved, and every element is still checked right
            pairs = [pair.partition(",") for pair in extra[1].split(":")]
            check(report["config"]["buffer_offsets"] == [{"send": int(s), "recv": int(r or s)} for s, _, r in pairs],
                  str(report["config"]["buffer_offsets"]))
            check("past a page" in result.stdout, result.stdout)


def case_off_cache(ctx):
    # IMB's -off_cache: the calls take turns over page-aligned copies of the buffers; every
    # collective, both placements, still checked right on the last copy the calls reached.
    json_path = ctx.path("off-cache.json")
    result = ctx.run(3, "all", "-b", "96", "-e", "6K", "-f", "8", "--check", "--iters", "3", "--off-cache", "256K",
                     "--json", json_path)
    check(result.returncode == 0, result.stderr)
    report = load_report(ctx, json_path)
    check_consistent(report, 3)
    check(report["config"]["off_cache_bytes"] == 256 * 1024, str(report["config"].get("off_cache_bytes")))
    check("off cache: the calls take turns over buffer copies filling 262144 B" in result.stdout, result.stdout)
    timed = [e for e in report["results"] if "skipped" not in e]
    check(timed and all(e["wrong"] == 0 for e in timed), str([(e["collective"], e["wrong"]) for e in timed]))
    # Each copy keeps the placement past a page that --buffer-offsets gives (copies start a page apart).
    placed = ctx.path("off-cache-placed.json")
    result = ctx.run(2, "all", "--size", "6K", "--check", "--iters", "3", "--off-cache", "64K", "--buffer-offsets",
                     "8,20", "--json", placed)
    check(result.returncode == 0, result.stderr)
    timed = [e for e in load_report(ctx, placed)["results"] if "skipped" not in e]
    check(timed and all(e["wrong"] == 0 for e in timed), str([(e["collective"], e["wrong"]) for e in timed]))
    hot = ctx.path("hot.json")
    check(ctx.run(3, "allreduce", "--size", "768", "--iters", "2", "--json", hot).returncode == 0, "hot run")
    check(load_report(ctx, hot)["config"]["off_cache_bytes"] is None, "hot buffers by default")
    # compare warns when one report's buffers were hot and another's out of cache, and names both.
    result = ctx.run(0, "compare", hot, json_path)
    warnings = [l for l in result.stderr.splitlines() if l.startswith("warning")]
    check(result.returncode == 0 and warnings and "not equally out of cache" in warnings[0] and
          "off cache over 262144 B" in warnings[0], f"compare hot against off cache: {result.stderr}")
    check("not equally out of cache" not in ctx.run(0, "compare", hot, hot).stderr, "compare hot against hot")


def case_nonblocking(ctx):
    # IMB-NBC's pure non-blocking timing (Iallreduce_pure ...): each op the MPI_I* call and its wait, checked
    # like the blocking calls, on 2 and 3 ranks, off cache and on; the averaged all-reduce as
    # data parallelism issues it.
    for ranks, name, extra in ((2, "allreduce", ["--op", "avg"]), (3, "allgather", []),
                               (3, "reducescatter", ["--off-cache", "64K"])):
        json_path = ctx.path(f"nonblocking-{name}.json")
        result = ctx.run(ranks, name, "--nonblocking", "-b", "96", "-e", "48K", "-f", "8", "--check", "--iters", "3",
                         *extra, "--json", json_path)
        check(result.returncode == 0, f"{name}: {result.stderr}")
        report = load_report(ctx, json_path)
        check_consistent(report, ranks)
        check(report["config"]["nonblocking"] is True, f"{name}: config.nonblocking")
        check("non-blocking: each op is the collective's non-blocking call and its wait" in result.stdout,
              f"{name}: method line: {result.stdout}")
        timed = [e for e in report["results"] if "skipped" not in e]
        check(timed and all(e["wrong"] == 0 for e in timed), f"{name}: {[(e['bytes'], e['wrong']) for e in timed]}")
        in_place = [e for e in report["results"] if e.get("inplace")]
        if name == "reducescatter":
            # The MPI backend's non-blocking reduce-scatter takes no MPI_IN_PLACE: that half is skipped, named.
            check(in_place and all("no non-blocking in-place form" in e.get("skipped", "") for e in in_place),
                  f"reducescatter in place: {in_place}")
        else:
            check(any("skipped" not in e for e in in_place), f"{name}: the in-place half measured")
    blocking = ctx.path("blocking.json")
    check(ctx.run(2, "allreduce", "--op", "avg", "--size", "768", "--iters", "2", "--json", blocking).returncode == 0,
          "blocking run")
    check(load_report(ctx, blocking)["config"]["nonblocking"] is False, "blocking by default")
    # compare warns when one report timed the blocking calls and another the non-blocking ones.
    requests = ctx.path("nonblocking-allreduce.json")
    result = ctx.run(0, "compare", blocking, requests)
    warnings = [l for l in result.stderr.splitlines() if l.startswith("warning")]
    check(result.returncode == 0 and any("different forms of the calls" in w and "non-blocking" in w for w in warnings),
          f"compare blocking against non-blocking: {result.stderr}")
    check("different forms" not in ctx.run(0, "compare", blocking, blocking).stderr, "compare blocking against blocking")
    # A collective without a non-blocking form, and a CUDA graph, are refused in one line naming the flag.
    for arguments in (["broadcast", "--nonblocking", "--size", "1K"], ["all", "--nonblocking", "--size", "1K"],
                      ["allreduce", "--nonblocking", "--graph", "--size", "1K"]):
        result = ctx.run(0, *arguments)
        lines = result.stderr.strip().splitlines()
        check(result.returncode == 2 and len(lines) == 1 and "--nonblocking" in lines[0],
              f"{arguments}: exit {result.returncode}: {result.stderr}")


def case_compare(ctx):
    paths = []
    for name, ranks in (("a.json", 2), ("b.json", 2)):
        paths.append(ctx.path(name))
        result = ctx.run(ranks, "allreduce", "-b", "1K", "-e", "16K", "-f", "4", "--iters", "3", "--json", paths[-1])
        check(result.returncode == 0, result.stderr)
    result = ctx.run(0, "compare", *paths)
    check(result.returncode == 0, result.stderr)
    # Three sizes, each out of place and in place (the default --placement both).
    check("b.json busbw ratio" in result.stdout and result.stdout.count("allreduce") == 6, result.stdout)
    markdown = ctx.run(0, "compare", "--markdown", *paths).stdout
    check(markdown.startswith("| collective |") and "| --- |" in markdown, markdown)
    table = list(csv.reader(ctx.run(0, "compare", "--csv", *paths).stdout.splitlines()))
    check(len(table) == 7 and table[1][0] == "allreduce", f"csv {table}")
    printed = table[1][table[0].index("b.json busbw ratio")].rstrip("x")
    a, b = json.load(open(paths[0]))["results"][0], json.load(open(paths[1]))["results"][0]
    # Right to the digits printed: a relative tolerance fails small ratios, whose rounding
    # is a larger share of them.
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    expected = b["busbw_gbps"] / a["busbw_gbps"]
    check(abs(float(printed) - expected) <= 0.5 * 10 ** -decimals * (1 + 1e-9),
          f"ratio of busbw printed {printed}, the reports give {expected}")


def case_watchdog(ctx):
    json_path = ctx.path("hang.json")
    result = ctx.run(2, "allreduce", "--size", "8", "--timeout", "2", "--inject-hang", "1", "--json", json_path,
                     timeout=60)
    check(result.returncode != 0, "a hung run must fail")
    check("timed out" in result.stderr and "allreduce" in result.stderr and "iteration 0" in result.stderr,
          result.stderr)
    check(not os.path.exists(json_path), "no report from a run that measured nothing")


def case_sweep(ctx):
    """scripts/sweep.sh runs every entry of a sweep file and describes the machine."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PARBENCH_RESULTS_DIR=ctx.tmp, PARBENCH_RUN_ID="smoke",
               PARBENCH_BUILD_DIR=os.path.dirname(os.path.abspath(ctx.parbench)))
    result = subprocess.run([os.path.join(root, "scripts", "sweep.sh"), os.path.join(root, "configs", "sweeps", "smoke.json")],
                            capture_output=True, text=True, timeout=600, env=env, stdin=subprocess.DEVNULL)
    check(result.returncode == 0, result.stdout + result.stderr)
    folder = os.path.join(ctx.tmp, "smoke")
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    check([run["name"] for run in manifest["runs"]] == ["all-np1", "all-np2"], f"runs: {manifest['runs']}")
    check(all(run["exit_status"] == 0 for run in manifest["runs"]), "exit statuses")
    check(manifest["machine"]["cores"] >= 1 and manifest["machine"]["cpu"], "machine described")
    for name, ranks in (("all-np1", 1), ("all-np2", 2)):
        report = load_report(ctx, os.path.join(folder, f"{name}.json"))
        check_consistent(report, ranks)
        check(os.path.exists(os.path.join(folder, f"{name}.csv")), f"{name}.csv")
    manifest_schema = json.load(open(os.path.join(root, "schemas", "sweep-manifest.schema.json")))
    jsonschema.validate(manifest, manifest_schema)
    # Issue 32: every run got --csv, which train, plan and pairs do not take: such a sweep always failed.
    sweep = ctx.path("others.json")
    json.dump({"runs": [{"name": "plan", "ranks": 1, "args": ["plan", "--params", "125M", "--gpus", "8"]},
                        {"name": "train", "ranks": 1, "args": ["train", "--model", "mlp-tiny", "--steps", "1", "--quiet"]},
                        {"name": "pairs", "ranks": 2, "args": ["pairs", "--size", "1K", "--iters", "2",
                                                                "--latency-iters", "2", "--warmup", "0"]}]},
              open(sweep, "w"))
    result = subprocess.run([os.path.join(root, "scripts", "sweep.sh"), sweep], capture_output=True, text=True,
                            timeout=600, env=dict(env, PARBENCH_RUN_ID="others"), stdin=subprocess.DEVNULL)
    check(result.returncode == 0, result.stdout + result.stderr)
    manifest = json.load(open(os.path.join(ctx.tmp, "others", "manifest.json")))
    jsonschema.validate(manifest, manifest_schema)
    check([(run["name"], run["exit_status"], run["reports"]) for run in manifest["runs"]] ==
          [(name, 0, [f"{name}.json"]) for name in ("plan", "train", "pairs")], f"runs: {manifest['runs']}")
    check(json.load(open(os.path.join(ctx.tmp, "others", "plan.json")))["schema"] == "parbench.plan/v1", "plan's report")


def case_placement_summary(ctx):
    """Validation is on by default, both placements share a row, the summary closes the run."""
    json_path = ctx.path("both.json")
    result = ctx.run(2, "all", "-b", "8", "-e", "4K", "-f", "16", "--iters", "3", "--json", json_path)
    check(result.returncode == 0, result.stderr)
    report = load_report(ctx, json_path)
    check_consistent(report, 2)
    check(report["config"]["check"] is True and report["config"]["placement"] == "both", "defaults in config")
    check("# validation: one checked run per size" in result.stdout, "header names the validation")
    check(report["config"]["mpi_threads"] == {"requested": "single", "provided": "single"}, "MPI_Init by default")
    check("MPI thread level single" in result.stdout, "thread level in the header")
    measured = [e for e in report["results"] if "skipped" not in e]
    check(all(e["wrong"] == 0 for e in measured), "checked by default")
    for name in BUS_FACTORS:
        placements = sorted(e["placement"] for e in report["results"] if e["collective"] == name)
        check(placements == ["in"] * 3 + ["out"] * 3, f"{name}: both placements per size, got {placements}")
    # One console row per size with both halves: 3 sizes x 10 collectives.
    rows = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    check(len(rows) == 30, f"{len(rows)} rows: {result.stdout}")
    check(all(len(line.split()) >= 13 for line in rows), "each row has two halves")
    skipped = [line for line in rows if "skipped" in line]
    check(len(skipped) == 6 and all("in-place skipped" in line for line in skipped),
          "sendrecv and alltoallv in place skipped")
    summary = report["summary"]
    check(summary["status"] == "OK" and summary["wrong_total"] == 0 and summary["checked"], f"summary {summary}")
    check(summary["measured_points"] == len(measured), "measured points")
    average = sum(e["busbw_gbps"] for e in measured) / len(measured)
    check(math.isclose(summary["average_busbw_gbps"], average, rel_tol=1e-9), "average busbw over points")
    peak = max(measured, key=lambda e: e["busbw_gbps"])
    check(math.isclose(summary["peak"]["busbw_gbps"], peak["busbw_gbps"]) and summary["peak"]["bytes"] == peak["bytes"],
          "peak busbw and its size")
    check("# wrong elements: 0 OK" in result.stdout and "# peak busbw:" in result.stdout, "summary lines")
    collectives = len({e["collective"] for e in measured})
    check(f"(mean over the {len(measured)} measured points ({collectives} collectives, 3 sizes, out of place and in place); "
          "an average, not a peak)" in result.stdout, f"what the average is over: {result.stdout}")
    check_tally(result.stderr, summary, measured)

    # --no-check: nothing validated, and the header and summary say so; --placement in, rank0.
    result = ctx.run(2, "allreduce", "-b", "8", "-e", "1K", "-f", "8", "--iters", "3", "--no-check", "--placement",
                     "in", "--aggregate", "rank0", "--json", json_path)
    check(result.returncode == 0, result.stderr)
    report = load_report(ctx, json_path)
    check_consistent(report, 2)
    check(all(e["wrong"] is None and e["placement"] == "in" for e in report["results"]), "unchecked, in place")
    check(report["summary"]["status"] == "not checked", "summary says not checked")
    check("off (-c 0 / --no-check)" in result.stdout and "not checked" in result.stdout, result.stdout)
    for entry in report["results"]:
        check(entry["aggregation"] == "rank0" and math.isclose(entry["reported_time_us"],
              entry["per_rank"][0]["median_us"], rel_tol=1e-9), "rank0 is rank 0's median")
    # -c/--check stays accepted; --quiet prints errors only; --verbose prints each warning.
    result = ctx.run(2, "allreduce", "--size", "1K", "--iters", "3", "-c", "--quiet")
    check(result.returncode == 0 and result.stdout == "" and not result.stderr.strip(), result.stdout + result.stderr)
    result = ctx.run(2, "reduce", "--size", "1K", "--iters", "4", "--aggregate", "rank-max", "--json", json_path)
    check(result.returncode == 0 and "t_max" in result.stdout, result.stdout + result.stderr)
    check_consistent(load_report(ctx, json_path), 2)
    result = ctx.run(2, "allreduce", "--size", "1K", "--iters", "6", "--aggregate", "rank-mean", "--verbose",
                     "--mpi-threads", "funneled", "--json", json_path)
    check(result.returncode == 0, result.stderr)
    report = load_report(ctx, json_path)
    check_consistent(report, 2)
    check("t_avg" in result.stdout, "rank-mean's column is IMB's t_avg")
    check(report["config"]["mpi_threads"]["requested"] == "funneled", "funneled requested")
    for entry in report["results"]:
        for warning in entry["warnings"]:
            check(warning in result.stderr, f"--verbose prints {warning!r}")


def check_tally(stderr, summary, measured):
    """Warnings are one tally line, written whole, unless --verbose; the JSON keeps each one."""
    lines = stderr.splitlines()
    per_point = [line for line in lines if line.startswith("warning: ") and " B " in line]
    check(not per_point, f"per-point warnings without --verbose: {per_point}")
    tallies = [line for line in lines if " points warned: " in line or " point warned: " in line]
    check(len(tallies) == (1 if summary["warning_points"] else 0), f"one tally line: {stderr}")
    if not tallies:
        return
    match = re.fullmatch(r"warning: (\d+) of (\d+) points? warned: (.+?) \(--verbose prints each; the JSON report "
                         r"has them all\)", tallies[0])
    check(match, f"tally line: {tallies[0]!r}")
    warned = sum(1 for e in measured if e["warning_kinds"])
    check(int(match.group(1)) == warned and int(match.group(2)) == len(measured), f"counts: {tallies[0]}")
    kinds = dict(re.fullmatch(r"(.+) \((\d+)\)", part).groups() for part in match.group(3).split(", "))
    check(set(kinds) == {kind.replace("-", " ") for kind in summary["warning_points"]}, f"kinds: {tallies[0]}")
    for kind, points in summary["warning_points"].items():
        check(points == sum(1 for e in measured if kind in e["warning_kinds"]), f"tally of {kind}")
        check(int(kinds[kind.replace("-", " ")]) == points, f"{kind} in the line: {tallies[0]}")


def case_habits(ctx):
    """What users of nccl-tests expect: its closing lines, its NCCL_TESTS_MIN_BW gate (also as
    --min-busbw), progress on a long point, and --help listing the flags that apply."""
    reducing = {"allreduce", "reducescatter", "reduce", "all"}
    rooted = {"broadcast", "reduce", "gather", "scatter", "all"}
    for name in list(BUS_FACTORS) + ["all"]:
        text = subprocess.run([ctx.parbench, name, "--help"], capture_output=True, text=True).stdout
        flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
        check(("--op" in flags) == (name in reducing), f"{name} --help and --op: {sorted(flags)}")
        check(("--root" in flags) == (name in rooted), f"{name} --help and --root: {sorted(flags)}")
        check(not any(flag.startswith("--inject") for flag in flags) and "Testing" not in text,
              f"{name} --help lists test-only flags: {text}")
        check({"--min-busbw", "--progress", "--size", "--timeout"} <= flags, f"{name} --help: {sorted(flags)}")
    # A hidden flag is still refused with its reason, not as unknown.
    result = ctx.run(2, "allgather", "--size", "1K", "--op", "max")
    check(result.returncode == 2 and "--op applies to reducing collectives" in result.stderr, result.stderr)

    # nccl-tests' closing lines, beside parbench's own; the average is the report's.
    json_path = ctx.path("habits.json")
    base = ["allreduce", "-b", "8", "-e", "512", "-f", "8", "--iters", "3", "--warmup", "1", "--json", json_path]
    result = ctx.run(2, *base)
    check(result.returncode == 0, result.stderr)
    report = load_report(ctx, json_path)
    average = report["summary"]["average_busbw_gbps"]
    check(re.search(r"^# Out of bounds values : 0 OK$", result.stdout, re.M), result.stdout)
    found = re.search(r"^# Avg bus bandwidth    : ([0-9.e+-]+)$", result.stdout, re.M)
    check(found and math.isclose(float(found.group(1)), average, rel_tol=1e-5), f"{average}: {result.stdout}")
    check(f"(mean over the 6 measured points (3 sizes, out of place and in place)" in result.stdout, result.stdout)
    result = ctx.run(2, *base, "--placement", "out", "--no-check")
    check("(mean over the 3 measured sizes; an average, not a peak)" in result.stdout, result.stdout)
    check(re.search(r"^# Out of bounds values : N/A \(-c 0 / --no-check\)$", result.stdout, re.M), result.stdout)

    # The gate: below it the run fails (exit 1, report failed, one error line with both figures).
    gates = [  # (flag, environment, exit status, source named)
        (["--min-busbw", "1e6"], {}, 1, "--min-busbw"),
        ([], {"NCCL_TESTS_MIN_BW": "1e6"}, 1, "NCCL_TESTS_MIN_BW"),
        ([], {"NCCL_TESTS_MIN_BW": "1e-9"}, 0, None),
        (["--min-busbw", "1e-9"], {"NCCL_TESTS_MIN_BW": "1e6"}, 0, None),  # the flag wins
    ]
    for flag, env, status, source in gates:
        result = ctx.run(2, *base, *flag, env=env)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
        check(result.returncode == status, f"{flag} {env}: exit {result.returncode}: {result.stderr}")
        report = load_report(ctx, json_path)
        line = re.search(r"^# Avg bus bandwidth    : ([0-9.e+-]+) (OK|FAILED)$", result.stdout, re.M)
        check(line and line.group(2) == ("FAILED" if status else "OK"), f"{flag} {env}: {result.stdout}")
        if status:
            check(len(errors) == 1 and f"GB/s is below 1000000.00 GB/s ({source})" in errors[0]
                  and f"{report['summary']['average_busbw_gbps']:.2f} GB/s" in errors[0], f"{flag} {env}: {errors}")
            check(report["status"] == "failed", f"{flag} {env}: report status {report['status']}")
        else:
            check(not errors and report["status"] == "complete", f"{flag} {env}: {result.stderr}")
    for flag, env, needle in ((["--min-busbw", "-1"], {}, "--min-busbw"),
                              (["--min-busbw", "nan"], {}, "--min-busbw"),
                              ([], {"NCCL_TESTS_MIN_BW": "fast"}, "NCCL_TESTS_MIN_BW='fast'")):
        os.path.exists(json_path) and os.remove(json_path)
        result = ctx.run(2, *base, *flag, env=env)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
        check(result.returncode == 2 and len(errors) == 1 and needle in errors[0], f"{flag} {env}: {result.stderr}")
        check(not os.path.exists(json_path), f"{flag} {env}: left a report")

    # A long point says where it is, every --progress seconds, on the first rank only; the
    # straggler makes each of 1500 iterations last at least 2 ms (3 s in all).
    long_point = ["allreduce", "--size", "1K", "--iters", "1500", "--warmup", "1", "--placement", "out",
                  "--inject-straggler", "1", "--inject-straggler-us", "2000"]
    result = ctx.run(2, *long_point, "--progress", "1")
    check(result.returncode == 0, result.stderr)
    progress = [line for line in result.stderr.splitlines() if line.startswith("progress")]
    check(len(progress) >= 2, f"progress lines: {result.stderr}")
    for line in progress:
        check(re.fullmatch(r"progress: allreduce \(size 1024 B, (warm-up|timed) iteration \d+\); this point has run "
                           r"\d+ s", line), f"progress line: {line!r}")
    check(not [line for line in result.stdout.splitlines() if "progress" in line], "progress stays off stdout")
    for quiet in (["--progress", "0"], ["--progress", "1", "--quiet"]):
        result = ctx.run(2, *long_point, *quiet)
        check(result.returncode == 0 and "progress" not in result.stderr, f"{quiet}: {result.stderr}")


def case_straggler(ctx):
    """A rank that sleeps after each barrier is named as the one the others waited for."""
    json_path = ctx.path("straggler.json")
    # 50 ms: far above what a loaded 2-core machine adds by rescheduling a waking rank, so
    # the wait stays above the share of the op time a straggler must hold to be named.
    result = ctx.run(2, "allreduce", "-b", "1K", "-e", "64K", "-f", "64", "--iters", "6", "--placement", "out",
                     "--inject-straggler", "1", "--inject-straggler-us", "50000", "--json", json_path)
    check(result.returncode == 0, result.stderr)
    report = load_report(ctx, json_path)
    check_consistent(report, 2)
    for entry in report["results"]:
        straggler = entry["straggler"]
        check(straggler["rank"] == 1 and straggler["consistent"], f"{entry['bytes']} B: {straggler}")
        check(straggler["wait_us"] > 40000, f"waited about 50 ms, got {straggler['wait_us']}")
        # The straggler's own time is the shortest: it arrives last and waits for nobody.
        ranks = entry["per_rank"]
        check(ranks[1]["median_us"] < ranks[0]["median_us"], f"straggler's own time is shortest: {ranks}")
    check(report["summary"]["straggler_warning"].startswith("rank 1 "), report["summary"])
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning: rank 1 ")]
    check(len(warned) == 1 and "waited for" in warned[0], result.stderr)


def skew_blocks(count, ranks, skew):
    """Each destination's block in popularity order, as docs/collectives.md defines --skew, written
    independently of the C++: integer weights, floors, then one element each to the largest
    remainders (the more popular first among equals)."""
    kind, _, value = skew.partition(":")
    weights = [1] * ranks
    if kind == "zipf":
        weights = [math.floor(2 ** 40 * (p + 1) ** -float(value) + 0.5) for p in range(ranks)]
    elif kind == "hot":
        hot, cold = int(value), ranks - int(value)
        if 9 * cold >= hot:
            weights = [9 * cold if p < hot else hot for p in range(ranks)]
    total = sum(weights)
    blocks = [count * w // total for w in weights]
    remainders = [count * w % total for w in weights]
    for p in sorted(range(ranks), key=lambda p: (-remainders[p], p))[:count - sum(blocks)]:
        blocks[p] += 1
    return blocks


def case_alltoallv_report(ctx):
    """alltoallv's report: the skew it ran, the imbalance against docs/collectives.md's definitions,
    nccl-tests' bandwidths on each rank's send buffer, no in-place half, every element checked."""
    ranks = 3
    json_path = ctx.path("alltoallv.json")
    for skew, seed in (("hot:1", 1), ("zipf:1.2", 5), ("uniform", 1)):
        extra = ["--skew-seed", str(seed)] if seed != 1 else []
        result = ctx.run(ranks, "alltoallv", "-b", "1K", "-e", "64K", "-f", "8", "--iters", "3", "--skew", skew,
                         *extra, "--json", json_path)
        check(result.returncode == 0, f"{skew}: exit {result.returncode}: {result.stderr}")
        report = load_report(ctx, json_path)
        check_consistent(report, ranks)
        check(report["config"]["skew"] == skew and report["config"]["skew_seed"] == seed, str(report["config"]))
        check(f"# alltoallv (--skew {skew}, seed {seed}; size: each rank's send buffer)" in result.stdout,
              result.stdout)
        measured = [e for e in report["results"] if "skipped" not in e]
        skipped = [e for e in report["results"] if "skipped" in e]
        check(len(measured) == 3 and all(e["placement"] == "out" for e in measured), "3 sizes out of place")
        check(len(skipped) == 3 and all(e["placement"] == "in" for e in skipped), "in place skipped")
        lines = [line for line in result.stdout.splitlines() if line.startswith("#   per rank max/mean: received")]
        check(len(lines) == 3, f"one imbalance line per size: {result.stdout}")
        for entry, line in zip(measured, lines):
            check(entry["skew"] == {"distribution": skew, "seed": seed, "direction": "dispatch"}, str(entry["skew"]))
            check(entry["wrong"] == 0, f"{skew} {entry['bytes']} B: {entry['wrong']} wrong")
            element = 4
            count = entry["count"]
            blocks = skew_blocks(count, ranks, skew)
            sent, received = entry["imbalance"]["sent"], entry["imbalance"]["received"]
            # Every rank sends its whole buffer; a rank receives its block from each of the n.
            check(sent["max_bytes"] == entry["bytes"] and math.isclose(sent["max_over_mean"], 1.0), str(sent))
            check(received["max_bytes"] == ranks * max(blocks) * element, f"{skew}: {received} vs {blocks}")
            check(math.isclose(received["mean_bytes"], entry["bytes"]), str(received))
            check(math.isclose(received["max_over_mean"], ranks * max(blocks) / count), str(received))
            check(0 <= received["max_rank"] < ranks, str(received))
            check(f"received {received['max_over_mean']:.2f} (rank {received['max_rank']}, "
                  f"{received['max_bytes']} B)" in line, line)
        if skew == "hot:1":  # 90% to one rank: it receives 2.7 buffers of the 3 sent
            check(math.isclose(measured[-1]["imbalance"]["received"]["max_over_mean"], 2.7, rel_tol=1e-3),
                  str(measured[-1]["imbalance"]))
        if skew == "uniform":
            check(all(math.isclose(e["imbalance"]["received"]["max_over_mean"], 1.0, rel_tol=0.01) for e in measured),
                  "uniform is even")
    # --direction combine: the transpose, every rank receiving its buffer back, the hot rank sending
    # 2.7 buffers; validated the same way.
    result = ctx.run(ranks, "alltoallv", "-b", "1K", "-e", "64K", "-f", "8", "--iters", "3", "--skew", "hot:1",
                     "--direction", "combine", "--json", json_path)
    check(result.returncode == 0, f"combine: exit {result.returncode}: {result.stderr}")
    report = load_report(ctx, json_path)
    check_consistent(report, ranks)
    check(report["config"]["direction"] == "combine", str(report["config"]))
    check("# alltoallv (--skew hot:1, seed 1, combine; size: each rank's receive buffer" in result.stdout,
          result.stdout)
    measured = [e for e in report["results"] if "skipped" not in e]
    check(len(measured) == 3, "combine: 3 sizes out of place")
    for entry in measured:
        check(entry["skew"] == {"distribution": "hot:1", "seed": 1, "direction": "combine"}, str(entry["skew"]))
        check(entry["wrong"] == 0, f"combine {entry['bytes']} B: {entry['wrong']} wrong")
        blocks = skew_blocks(entry["count"], ranks, "hot:1")
        sent, received = entry["imbalance"]["sent"], entry["imbalance"]["received"]
        check(received["max_bytes"] == entry["bytes"] and math.isclose(received["max_over_mean"], 1.0), str(received))
        check(sent["max_bytes"] == ranks * max(blocks) * 4, f"combine: {sent} vs {blocks}")
    check(math.isclose(measured[-1]["imbalance"]["sent"]["max_over_mean"], 2.7, rel_tol=1e-3),
          str(measured[-1]["imbalance"]))
    # `all` runs it too, with the skew given, and the report keeps the distribution.
    result = ctx.run(2, "all", "--size", "4K", "--iters", "2", "--skew", "hot:2", "--json", json_path)
    check(result.returncode == 0, result.stderr)
    report = load_report(ctx, json_path)
    entries = [e for e in report["results"] if e["collective"] == "alltoallv" and "skipped" not in e]
    check(len(entries) == 1 and entries[0]["skew"]["distribution"] == "hot:2" and entries[0]["wrong"] == 0,
          str(entries))
    check(all("skew" not in e for e in report["results"] if e["collective"] != "alltoallv"), "skew on alltoallv only")


BAD_INPUT = [
    # (ranks, arguments, text the one error line must contain)
    (0, ["frobnicate"], "frobnicate"),
    (0, ["allreduce", "--bogus"], "--bogus"),
    (0, ["allreduce", "--repeat", "-1"], "--repeat -1"),
    (0, ["allreduce", "--inject-slowdown", "1.5"], "--inject-slowdown"),
    (2, ["allreduce", "--size", "0"], "--size"),
    (2, ["allreduce", "--size", "-5"], "--size"),
    (2, ["allreduce", "--size", "12Q"], "--size"),
    (2, ["allreduce", "-b", "1M", "-e", "1K"], "--min-bytes"),
    (2, ["allreduce", "--dtype", "float8"], "--dtype"),
    (2, ["allreduce", "--op", "xor"], "--op"),
    (2, ["allreduce", "--op", "avg", "--dtype", "int32"], "--op avg"),
    (2, ["broadcast", "--root", "5"], "--root"),
    (2, ["allreduce", "--buffer-offsets", "4096"], "--buffer-offsets '4096'"),
    (2, ["allreduce", "--off-cache", "0"], "--off-cache '0'"),
    (2, ["allreduce", "--off-cache", "lots"], "--off-cache"),
    (2, ["alltoall", "--buffer-pages", "giant"], "--buffer-pages: 'giant'"),
    (2, ["train", "--model", "gpt-tiny", "--buffer-pages", "4k"], "--buffer-pages: '4k'"),
    (2, ["allreduce", "--buffer-offsets", "0,x"], "each a byte count from 0 to 4095"),
    (2, ["allreduce", "--buffer-offsets", "0,6"], "not a whole number of float32 elements"),
    (2, ["allreduce", "--dtype", "float64", "--buffer-offsets", "4"], "float64 elements (8 bytes each)"),
    (2, ["allreduce", "--buffer-offsets", "0,16:0,16:0,16"], "gives 3 pairs for 2 ranks"),
    (2, ["allreduce", "--buffer-offsets", "0,16:"], "one pair per rank"),
    (3, ["allgather", "--size", "100"], "nearest valid sizes are 96 and 108"),
    (2, ["allreduce", "--json", "/nonexistent-folder/r.json"], "--json"),
    (2, ["allreduce", "--csv", "/nonexistent-folder/r.csv"], "--csv"),
    (2, ["allreduce", "--timing", "sometimes"], "--timing"),
    (2, ["allreduce", "--backend", "gloo"], "--backend"),
    (2, ["allreduce", "--iters", "0"], "--iters"),
    (0, ["compare", "one.json"], "at least two"),
    (2, ["allreduce", "--placement", "sideways"], "--placement"),
    (2, ["allreduce", "--placement", "out", "--inplace"], "--inplace"),
    (2, ["allreduce", "--aggregate", "median"], "--aggregate"),
    (2, ["allreduce", "--mpi-threads", "many"], "--mpi-threads"),
    (2, ["allreduce", "--verbose", "--quiet"], "--quiet"),
    (2, ["alltoallv", "--skew", "zipf:-1"], "--skew 'zipf:-1'"),
    (2, ["alltoallv", "--skew", "zipf:"], "--skew 'zipf:'"),
    (2, ["alltoallv", "--skew", "hot:0"], "--skew 'hot:0'"),
    (2, ["alltoallv", "--skew", "hot:3"], "--skew hot:3: 3 hot destinations among 2 ranks"),
    (2, ["alltoallv", "--skew", "pareto:2"], "--skew 'pareto:2'"),
    (2, ["allreduce", "--skew", "hot:1"], "--skew shapes alltoallv"),
    (2, ["broadcast", "--skew-seed", "3"], "--skew-seed shapes alltoallv"),
    (2, ["alltoallv", "--direction", "back"], "--direction 'back'"),
    (2, ["allreduce", "--direction", "combine"], "--direction shapes alltoallv"),
]


def case_bad_input(ctx):
    for ranks, arguments, needle in BAD_INPUT:
        report = ctx.path("bad.json")
        if "--json" not in arguments and arguments[0] != "compare":
            arguments = arguments + ["--json", report]
        result = ctx.run(ranks, *arguments, timeout=60)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
        check(result.returncode == 2, f"{arguments}: exit {result.returncode}, stderr {result.stderr}")
        check(len(errors) == 1 and needle in errors[0], f"{arguments}: want one error line with {needle!r}: {result.stderr}")
        check(not os.path.exists(report), f"{arguments}: left a report behind")
    not_json = ctx.path("not.json")
    open(not_json, "w").write("{ nope")
    other = ctx.path("other.json")
    json.dump({"hello": 1}, open(other, "w"))
    for arguments, needle in ((["compare", not_json, not_json], "not valid JSON"),
                              (["compare", other, other], "not a parbench report"),
                              (["compare", ctx.path("missing.json"), other], "cannot read")):
        result = ctx.run(0, *arguments)
        check(result.returncode == 2 and needle in result.stderr, f"{arguments}: {result.returncode} {result.stderr}")


def thp_enabled():
    """The kernel's THP setting for 2 MiB pages, read as parbench reads it (device/host_pages.cpp)."""
    def chosen(path):
        try:
            line = open(path).readline()
        except OSError:
            return None
        return line[line.index("[") + 1:line.index("]")] if "[" in line else None
    pmd = chosen("/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled")
    return pmd if pmd not in (None, "inherit") else chosen("/sys/kernel/mm/transparent_hugepage/enabled") or "unavailable"


def case_buffer_pages(ctx):
    """--buffer-pages on every command that allocates buffers: the header and the report say
    what was asked and what a probe read back from the kernel got, which must be what this
    host's THP setting gives; ranks that disagree are refused; compare warns loudly when two
    reports' pages differ."""
    thp = thp_enabled()
    # What each policy must obtain under each setting: huge pages when asked for under madvise
    # or always; a plain allocation gets them under always only.
    expected = {"normal": "huge" if thp == "always" else "normal",
                "huge": "huge" if thp in ("madvise", "always") else "normal"}
    runs = [("normal", ["alltoall", "--size", "64K", "--iters", "2", "--warmup", "0"]),
            ("huge", ["alltoall", "--size", "64K", "--iters", "2", "--warmup", "0", "--buffer-pages", "huge"]),
            ("huge", ["train", "--model", "gpt-tiny", "--steps", "1", "--warmup", "0", "--buffer-pages", "huge"]),
            ("normal", ["pairs", "--size", "64K", "--iters", "2", "--latency-iters", "2", "--warmup", "0",
                        "--buffer-pages", "normal"])]
    reports = {}
    for asked, arguments in runs:
        path = ctx.path(f"{arguments[0]}-{asked}.json")
        result = ctx.run(2, *arguments, "--json", path)
        check(result.returncode == 0, f"{arguments}: {result.stderr}")
        record = load_report(ctx, path)["environment"]["buffer_pages"]
        check(record["requested"] == asked and record["obtained"] == expected[asked],
              f"{arguments} under THP {thp}: asked {record['requested']}, obtained {record['obtained']}; expected "
              f"{asked} and {expected[asked]}: {record}")
        check(record["thp_enabled"] == thp and len(record["probe_huge_bytes_by_rank"]) == 2, f"{arguments}: {record}")
        line = [l for l in result.stdout.splitlines() if l.startswith("# buffer pages: ")]
        check(len(line) == 1 and line[0].startswith(f"# buffer pages: {asked} (") and
              f"obtained {expected[asked]}" in line[0], f"{arguments}: header {line}")
        reports.setdefault(arguments[0], []).append(path)
    # Ranks given different policies: one error line, exit 2, no report.
    path = ctx.path("mixed.json")
    mixed = ctx.mpiexec + ["-np", "1", ctx.parbench, "allreduce", "--size", "1K", "--json", path, ":", "-np", "1",
                           ctx.parbench, "allreduce", "--size", "1K", "--json", path, "--buffer-pages", "huge"]
    result = subprocess.run(mixed, capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    errors = [l for l in result.stderr.splitlines() if l.startswith("error")]
    check(result.returncode == 2 and len(errors) == 1 and "--buffer-pages differs between ranks" in errors[0],
          f"ranks with different --buffer-pages: exit {result.returncode}, {result.stderr}")
    check(not os.path.exists(path), "ranks with different --buffer-pages left a report behind")
    # compare: the pages each report's buffers got head its columns, and a difference is warned of first.
    normal, huge = reports["alltoall"]
    if expected["normal"] == expected["huge"]:  # THP always or never: make the second one differ
        document = json.load(open(huge))
        document["environment"]["buffer_pages"]["obtained"] = "partly huge"
        json.dump(document, open(huge, "w"))
    result = ctx.run(0, "compare", normal, huge)
    warnings = [l for l in result.stderr.splitlines() if l.startswith("warning")]
    check(result.returncode == 0 and warnings and "warning: the reports' buffers were on different pages" in warnings[0],
          f"compare of two page policies: {result.returncode} {result.stderr}")
    check(f"{expected['normal']} pages" in result.stdout.splitlines()[0], result.stdout)
    same = ctx.run(0, "compare", normal, normal)
    check("different pages" not in same.stderr, same.stderr)


CASES = {name[len("case_"):]: function for name, function in globals().items() if name.startswith("case_")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--schema", required=True)
    args = parser.parse_args()
    ctx = Context(args)
    try:
        CASES[args.case](ctx)
    except AssertionError as error:
        print(f"FAILED {args.case}: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    print(f"passed {args.case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
