#!/usr/bin/env python3
"""End-to-end tests of issue 35's features, run as a user would: expected values and verdicts
(--expect-host, --cluster, --min-ratio), --background loads, compare with NCCL Inspector logs, and
moe-dispatch. Each case reads the JSON reports back, checks them against the schema and checks the
figures against each other; none asserts a timing (the machine is shared), only what must hold
whatever the timing.

Usage: verdicts_e2e.py CASE --parbench BIN --mpiexec MPIEXEC --schema SCHEMA --data DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import jsonschema

BANDS = {"LOW": (None, 0.5), "ok": (0.5, 1.25), "ABOVE": (1.25, None)}


class Context:
    def __init__(self, args):
        self.parbench = args.parbench
        self.mpiexec = args.mpiexec.split()
        self.schema = json.load(open(args.schema))
        self.data = args.data
        self.tmp = tempfile.mkdtemp(prefix="parbench-verdicts-")

    def path(self, name):
        return os.path.join(self.tmp, name)

    def run(self, ranks, *arguments, timeout=120):
        command = self.mpiexec + ["-np", str(ranks), self.parbench, *arguments] if ranks else [self.parbench, *arguments]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)

    def report(self, path):
        report = json.load(open(path))
        jsonschema.validate(report, self.schema)
        return report


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def refused(result, fragment):
    """Exit 2 with one error line naming `fragment`."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    check(result.returncode == 2, f"expected exit 2, got {result.returncode}: {result.stderr[-400:]}")
    check(len(errors) == 1 and fragment in errors[0], f"expected one error naming {fragment!r}: {errors}")


def check_verdicts(report):
    judged = [p for p in report["results"] if "skipped" not in p]
    check(judged, "no measured point")
    for p in judged:
        check({"expected", "ratio", "verdict", "verdict_cause"} <= p.keys(), f"point without a verdict: {sorted(p)}")
        ratio = p["busbw_gbps"] / p["expected"]["busbw_gbps"]
        check(abs(ratio - p["ratio"]) <= 1e-9 * max(1.0, ratio), f"ratio {p['ratio']} is not busbw / expected {ratio}")
        low, high = BANDS[p["verdict"]]
        check((low is None or p["ratio"] >= low) and (high is None or p["ratio"] <= high),
              f"verdict {p['verdict']} at ratio {p['ratio']}")
        check((p["verdict_cause"] is None) == (p["verdict"] == "ok"), f"cause {p['verdict_cause']!r} for {p['verdict']}")
        expected = p["expected"]
        check(abs(expected["time_us"] - expected["latency_us"] - expected["bandwidth_us"]) <= 1e-9 * expected["time_us"],
              "expected time is not latency + bandwidth")
    return judged


def case_expected(ctx):
    # This host measured: every point judged, the model in the report, the columns on the console.
    result = ctx.run(2, "allreduce", "-b", "1K", "-e", "256K", "-f", "16", "-n", "5", "--expect-host",
                     "--json", ctx.path("host.json"))
    check(result.returncode == 0, f"--expect-host failed: {result.stderr[-600:]}")
    report = ctx.report(ctx.path("host.json"))
    host = report["expected_model"]["host"]
    check(host["ranks"] == 2 and host["step_latency_us"] > 0 and host["call_latency_us"] > 0, f"host model {host}")
    check(all(b["exchange_gbps"] > 0 and b["copy_gbps"] > 0 and b["reduce_gbps"] > 0 for b in host["bandwidths"]),
          "a measured bandwidth of 0")
    for p in check_verdicts(report):
        check(p["expected"]["level"] == "intra-host" and "this host" in p["expected"]["source"], p["expected"])
    check("ratio" in result.stdout and "# expected: this host measured" in result.stdout, "no verdict columns")

    # A cluster far faster than this host: every point is LOW, and --min-ratio fails the run.
    result = ctx.run(2, "allgather", "-b", "8M", "-e", "16M", "-n", "5", "--cluster", "H100",
                     "--min-ratio", "0.5", "--json", ctx.path("h100.json"))
    check(result.returncode == 1, f"--min-ratio against H100 links should fail: {result.returncode} {result.stderr[-400:]}")
    report = ctx.report(ctx.path("h100.json"))
    check(report["status"] == "failed" and "--min-ratio 0.5" in report["status_reason"], report.get("status_reason"))
    for p in check_verdicts(report):
        # NVLink's 360 GB/s against host memory: far beyond this machine at these sizes.
        check(p["verdict"] == "LOW" and p["expected"]["protocol"] == "Simple" and p["expected"]["busbw_gbps"] > 100,
              (p["verdict"], p["expected"]))
    check(any(line.startswith("error:") and "--min-ratio" in line for line in result.stderr.splitlines()),
          "no error line naming --min-ratio")

    # A gate far below any point passes (it judges each point, not the average).
    result = ctx.run(2, "allreduce", "--size", "64K", "-n", "5", "--min-ratio", "1e-9", "--json", ctx.path("pass.json"))
    check(result.returncode == 0, f"--min-ratio 1e-9 failed: {result.stderr[-400:]}")
    check(ctx.report(ctx.path("pass.json"))["status"] == "complete", "status")

    refused(ctx.run(0, "allreduce", "--min-ratio", "-1"), "--min-ratio")
    refused(ctx.run(0, "allreduce", "--cluster", ctx.path("absent.json")), "absent.json")
    refused(ctx.run(0, "allreduce", "--cluster", "H100", "--expect-host"), "--expect-host")


def case_background(ctx):
    for load, unit in (("gemm:64", "GFLOP/s"), ("stream:1M", "GB/s"), ("collective:64K", "GB/s")):
        result = ctx.run(2, "allreduce", "--size", "256K", "-n", "5", "--background", load, "--json", ctx.path("bg.json"))
        check(result.returncode == 0, f"--background {load} failed: {result.stderr[-600:]}")
        report = ctx.report(ctx.path("bg.json"))
        check(report["config"]["background"] == load.split(":")[0] + ":" + str(
            {"64": 64, "1M": 1 << 20, "64K": 65536}[load.split(":")[1]]), report["config"]["background"])
        wanted = "multiple" if load.startswith("collective") else "funneled"
        check(report["config"]["mpi_threads"]["requested"] == wanted, report["config"]["mpi_threads"])
        for p in report["results"]:
            b = p["background"]
            check(b["unit"] == unit and b["wrong_loaded"] == 0 and p["wrong"] == 0, b)
            check(abs(b["slowdown"] - b["time_loaded_us"] / b["time_alone_us"]) <= 1e-9 * b["slowdown"], b)
            check(b["time_alone_us"] == p["reported_time_us"], "time alone is not the point's time")
            check(b["load_units"]["alone"] > 0 and b["load_alone"] > 0, f"the load did no work alone: {b}")
            check(len(b["samples_loaded_us"]) == 5, "loaded samples")
        check(f"under {load.split(':')[0]}" in result.stdout, "no background line on the console")
    refused(ctx.run(0, "allreduce", "--background", "spin"), "--background")
    refused(ctx.run(0, "allreduce", "--background", "collective", "--mpi-threads", "funneled"), "--mpi-threads")


def case_inspector(ctx):
    inspector = os.path.join(ctx.data, "inspector")
    result = ctx.run(2, "allreduce", "-b", "1M", "-e", "4M", "-f", "4", "-n", "5", "--json", ctx.path("bench.json"))
    check(result.returncode == 0, result.stderr[-400:])
    bench = ctx.report(ctx.path("bench.json"))
    result = ctx.run(0, "compare", inspector, ctx.path("bench.json"), "--csv")
    check(result.returncode == 0, f"compare with Inspector logs failed: {result.stderr[-400:]}")
    rows = [line.split(",") for line in result.stdout.strip().splitlines()]
    heading, rows = rows[0], rows[1:]
    check(heading[0] == "collective" and "verdict" in heading, heading)
    by_key = {(r[0], int(r[1])): dict(zip(heading, r)) for r in rows}
    check(set(by_key) == {("allgather", 1 << 20), ("allreduce", 1 << 20), ("allreduce", 4 << 20)}, sorted(by_key))
    check(by_key[("allgather", 1 << 20)]["verdict"] == "no benchmark point", by_key[("allgather", 1 << 20)])
    for size in (1 << 20, 4 << 20):
        row = by_key[("allreduce", size)]
        point = next(p for p in bench["results"] if p["bytes"] == size and p["placement"] == "out")
        check(abs(float(row["benchmark busbw GB/s"]) - point["busbw_gbps"]) < 0.006, (row, point["busbw_gbps"]))
        ratio = float(row["job busbw GB/s (median)"]) / point["busbw_gbps"]
        check(abs(float(row["ratio"]) - ratio) < 0.01 * max(ratio, 0.01) + 0.006, (row["ratio"], ratio))
        verdict = "LOW" if ratio < 0.5 else "above benchmark" if ratio > 1.2 else "ok"
        if abs(ratio - 0.5) > 0.01 and abs(ratio - 1.2) > 0.01:
            check(row["verdict"] == verdict, (row["verdict"], ratio))
    # A gate no job passes: exit 3, each row below it named.
    result = ctx.run(0, "compare", inspector, ctx.path("bench.json"), "--threshold", "1e9")
    check(result.returncode == 3 and result.stderr.count("error: in-job allreduce") == 2, result.stderr[-600:])
    refused(ctx.run(0, "compare", inspector, os.path.join(inspector, "job-node-1-pid4101.log")), "report")


def moe_run(ctx, ranks, *flags):
    path = ctx.path(f"moe-{ranks}.json")
    result = ctx.run(ranks, "moe-dispatch", "--tokens", "48", "--hidden", "64", "--experts", "8", "-n", "3", "-w", "1",
                     *flags, "--json", path)
    check(result.returncode == 0, f"moe-dispatch {flags} on {ranks} ranks failed: {result.stderr[-600:]}")
    return result, ctx.report(path)


def check_moe(report, ranks):
    phases = {p["moe_phase"]: p for p in report["results"]}
    check(set(phases) == {"dispatch", "combine"}, sorted(phases))
    for phase in phases.values():
        check(phase["wrong"] == 0, f"{phase['moe_phase']}: {phase['wrong']} wrong")
        check(len(phase["per_rank"]) == ranks and len(phase["samples_us"]) == 3, "per-rank figures")
        slowest = max(phase["per_rank"], key=lambda r: r["median_us"])
        check(phase["slowest_rank"]["rank"] == slowest["rank"], "slowest rank")
    dispatch, combine = phases["dispatch"], phases["combine"]
    sent = sum(r["bytes"]["sent_intra_host"] + r["bytes"]["sent_inter_host"] for r in dispatch["per_rank"])
    received = sum(r["bytes"]["received_intra_host"] + r["bytes"]["received_inter_host"] for r in dispatch["per_rank"])
    check(sent == received and sent > 0, f"dispatch sent {sent} != received {received}")
    scale = {"bfloat16": 2, "float16": 2, "float32": 4}
    ratio = scale[combine["dtype"]] / scale[dispatch["dtype"]]
    for d, c in zip(dispatch["per_rank"], combine["per_rank"]):
        check(c["bytes"]["sent_intra_host"] == d["bytes"]["received_intra_host"] * ratio, "combine is not the transpose")
        check(d["bytes"]["ep_bench_sent"] <= d["bytes"]["sent_intra_host"] + d["bytes"]["sent_inter_host"],
              "ep_bench counts a token once per host, never more than the rows moved")
        check(d["bytes"]["sent_inter_host"] == 0 and d["bytes"]["ep_bench_sent_inter_host"] == 0, "one host")
    return dispatch


def case_moe(ctx, ranks):
    _, report = moe_run(ctx, ranks)
    uniform = check_moe(report, ranks)
    result, report = moe_run(ctx, ranks, "--skew", "hot:1", "--expert", "gemm", "--dispatch-dtype", "bfloat16",
                             "--combine-dtype", "float32")
    hot = check_moe(report, ranks)
    check(hot["imbalance"]["expert_load_max_over_mean"] > uniform["imbalance"]["expert_load_max_over_mean"],
          "hot:1 is not more imbalanced than uniform")
    check("dispatch" in result.stdout and "combine" in result.stdout and "imbalance" in result.stdout, result.stdout)
    # A capacity of 1.0 under hot:1 drops the hot expert's excess, and no expert keeps more than its share.
    _, report = moe_run(ctx, ranks, "--skew", "hot:1", "--capacity", "1.0")
    capped = check_moe(report, ranks)["imbalance"]
    check(capped["dropped_selections"] > 0, "capacity 1.0 under hot:1 drops selections")
    experts = 8
    kept_mean = (capped["selections"] - capped["dropped_selections"]) / experts
    capacity = -(-capped["selections"] // experts)
    check(capped["expert_load_max_over_mean"] * kept_mean <= capacity + 1e-9, (capped, capacity))
    refused(ctx.run(ranks, "moe-dispatch", "--experts", str(ranks * 2 + 1)), "--experts")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=["expected", "background", "inspector", "moe2", "moe4"])
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    ctx = Context(args)
    try:
        if args.case == "moe2":
            case_moe(ctx, 2)
        elif args.case == "moe4":
            case_moe(ctx, 4)
        else:
            globals()["case_" + args.case](ctx)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    print(f"{args.case}: ok")


if __name__ == "__main__":
    sys.exit(main())
