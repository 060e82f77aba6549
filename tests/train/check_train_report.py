#!/usr/bin/env python3
"""Runs one `parbench train` command line and judges it as a user would.

    check_train_report.py --json OUT [--expect-exit N] [--expect-no-report] [--expect-straggler RANK]
                          [--field PATH=VALUE ...] -- CMD...

With --expect-exit 0 (the default) the report must exist, follow the train result shape,
say check.passed when --check was given, and carry the --field values (dotted paths into
results[0], compared as JSON). Every such run is also held to the communication figures'
invariants: per dimension exposed <= comm time, per call blocked <= time, exposed <= step
time; no dimension whose group has one rank is reported; the traffic the layout implies
equals the measured on every rank; throughput is named for what it counts; and the memory
pre-check's count of every rank equals that rank's ledger peak. With
--expect-straggler the report names that rank as the one the others wait for, consistently,
and warns about it. With a non-zero exit status the run must print exactly one line on
stderr and, with --expect-no-report, leave no report file behind.
"""
import argparse
import json
import os
import subprocess
import sys

import jsonschema

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schemas", "report.schema.json")

REQUIRED = ["model", "layout", "global_batch", "seq_len", "warmup", "steps", "step_time_ms",
            "step_time_samples_ms", "throughput", "samples_per_s", "flops", "achieved_tflops_per_rank", "mfu",
            "memory_bytes", "memory_theoretical_bytes", "memory_predicted_bytes", "comm", "exposed_comm_ms", "loss"]


def fail(message, output=""):
    print("FAIL: " + message)
    if output:
        print(output)
    sys.exit(1)


def lookup(result, path):
    value = result
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def check_comm(result, output):
    """The invariants of the communication figures (docs/training.md)."""
    comm = result["comm"]
    # Measured per step as sums of per-call times: allow for the rounding of the JSON numbers.
    slack = 1e-6
    layout = result["layout"]
    cp = layout.get("cp", 1)
    # Under context parallelism the gradient group is dp x cp ("dp_cp") and dp carries nothing.
    extents = {"dp": layout["dp"] if cp == 1 else 1, "tp": layout["tp"], "pp": layout["pp"], "cp": cp,
               "dp_cp": layout["dp"] * cp if cp > 1 else 1}
    for dimension, extent in extents.items():
        if extent == 1 and (dimension in comm["dimensions"] or dimension in comm):
            fail(f"the {dimension} group has one rank, yet comm reports it", output)
    if cp > 1 and "cp" not in comm["dimensions"]:
        fail(f"a run with cp {cp} reports no cp traffic", output)
    if comm["calls_on_groups_of_one"] != 0:
        fail(f"{comm['calls_on_groups_of_one']} calls were issued on groups of one rank", output)
    for dimension in comm["dimensions"]:
        exposed, time = comm["exposed_ms"][dimension], comm["time_ms"][dimension]
        if not 0 <= exposed <= time + slack:
            fail(f"comm.exposed_ms.{dimension} = {exposed} is not within [0, comm.time_ms.{dimension} = {time}]",
                 output)
        for op, counter in comm[dimension].items():
            if counter["blocked_ms"] > counter["time_ms"] + slack:
                fail(f"comm.{dimension}.{op}: blocked {counter['blocked_ms']} ms > its time {counter['time_ms']} ms",
                     output)
        if comm["expected_matches"][dimension] is not True or comm["expected_matches_all_ranks"][dimension] is not True:
            fail(f"the expected {dimension} traffic differs from the measured "
                 f"(expected {comm['expected_calls'][dimension]} calls, {comm['expected_bytes'][dimension]} B; "
                 f"measured {comm[dimension]}; every rank: {comm['expected_matches_all_ranks'][dimension]})", output)
    # The MoE layers' all-to-alls: the exposed part is the time blocked in them, never more than
    # their time; without --moe-a2a-overlap(-1f1b) every call blocks, so it is all of it, exactly.
    for layer in result.get("moe", {}).get("layers", []):
        for part in ("dispatch", "combine"):
            time, exposed = layer[f"{part}_ms"], layer[f"{part}_exposed_ms"]
            if not 0 <= exposed <= time + slack:
                fail(f"moe layer {layer['layer']}: {part}_exposed_ms {exposed} is not within [0, {part}_ms {time}]",
                     output)
            overlapped = result["moe"]["a2a_overlap"] or result["moe"].get("a2a_overlap_1f1b", False)
            if not overlapped and exposed != time:
                fail(f"moe layer {layer['layer']}: blocking {part} exposed {exposed} ms != its time {time} ms", output)
    total = sum(comm["exposed_ms"].values())
    if result["exposed_comm_ms"] > total + slack:
        fail(f"exposed_comm_ms {result['exposed_comm_ms']} exceeds the sum over dimensions {total}", output)
    if result["exposed_comm_ms"] > result["step_time_ms"]["mean"] + slack:
        fail(f"exposed_comm_ms {result['exposed_comm_ms']} exceeds the step time {result['step_time_ms']['mean']}",
             output)
    gpt = result["model"]["kind"] != "mlp"  # a sequence model counts tokens
    unit = result["throughput"]["unit"]
    if unit != ("tokens/s" if gpt else "samples/s") or gpt != ("tokens_per_s" in result):
        fail(f"throughput of a {result['model']['kind']} model is named {unit!r}", output)


def check_memory_check(result, output, checked_reference):
    """The pre-check (src/cli/memory_check.hpp) counted, before anything was allocated, exactly what
    each rank's ledger then held at its peak; under --check also rank 0's serial reference; and
    the run passed it, so every count is within the budget it was held to."""
    checked = result["memory_checked_bytes"]
    measured = [rank["total_peak"] for rank in result["memory_bytes_by_rank"]]
    if checked["by_rank"] != measured:
        fail(f"the memory pre-check counted {checked['by_rank']} B by rank, the ledgers peaked at {measured} B", output)
    if (checked["reference"] is not None) != checked_reference:
        fail(f"memory_checked_bytes.reference is {checked['reference']} for a run with{'' if checked_reference else 'out'}"
             f" --check", output)
    budget = checked["budget_per_rank"]
    largest = max(checked["by_rank"] + ([checked["reference"]] if checked_reference else []))
    if budget is not None and largest > budget:
        fail(f"the run went ahead needing {largest} B per rank against a budget of {budget} B", output)


def check_context(result, output):
    """What context parallelism adds (docs/context.md): its groups, every rank's attention
    counters, and the activation memory one layer keeps equal to its formula."""
    layout = result["layout"]
    cp = layout["cp"]
    context = result.get("context")
    if context is None:
        fail("a context-parallel run has no 'context' section", output)
    world = layout["dp"] * layout["tp"] * layout["pp"] * cp
    for key in ("attention_compute_ms_by_rank", "wait_ms_by_rank", "bytes_sent_by_rank", "messages_by_rank",
                "attention_scores_by_rank"):
        if len(context[key]) != world or any(value < 0 for value in context[key]):
            fail(f"context.{key} does not hold one non-negative value per rank: {context[key]}", output)
    if any(value <= 0 for value in context["bytes_sent_by_rank"]) or any(v <= 0 for v in context["messages_by_rank"]):
        fail(f"a cp rank sent nothing: {context['bytes_sent_by_rank']}", output)
    groups = layout["groups"]["cp"]
    if len(groups) != world // cp or any(len(group) != cp for group in groups) or \
            sorted(rank for group in groups for rank in group) != list(range(world)):
        fail(f"layout.groups.cp {groups} does not cover the {world} ranks in groups of {cp}", output)
    if context["local_seq_len"] * cp != result["seq_len"]:
        fail(f"context.local_seq_len {context['local_seq_len']} x cp {cp} != seq_len {result['seq_len']}", output)
    if context["wait_ms_by_rank"] and max(context["wait_ms_by_rank"]) > result["step_time_ms"]["max"] + 1e-6:
        fail("a rank's cp waits exceed the slowest step", output)
    # Causal work per cp group: zigzag gives every rank the same number of scores; contiguous
    # chunks (none) give the last rank of a group the most, the first the fewest (ring; the
    # all-to-all form computes whole sequences for a share of the heads, balanced either way).
    scores, ranks_of = context["attention_scores_by_rank"], context["cp_rank_of_rank"]
    for group in groups:
        work = [scores[rank] for rank in group]
        balanced = context["balance"] == "zigzag" or context["style"] == "alltoall"
        if balanced and max(work) != min(work):
            fail(f"{context['style']}/{context['balance']}: cp group {group} computed unequal scores {work}", output)
        if not balanced and not all(a < b for a, b in zip(work, work[1:])):
            fail(f"ring without balance: cp group {group}'s scores {work} do not grow along the causal mask", output)
        if [ranks_of[rank] for rank in group] != list(range(cp)):
            fail(f"cp group {group} has cp coordinates {[ranks_of[rank] for rank in group]}", output)
    if context["counters_match_expected_all_ranks"] is not True:
        fail("a rank's cp bytes sent or messages differ from theory/context_parallel.hpp's counts", output)
    for key in ("saved_floats_per_layer", "workspace_bytes"):
        if context[key]["measured"] != context[key]["formula"]:
            fail(f"context.{key}: measured {context[key]['measured']}, formula {context[key]['formula']}", output)
    activation = result["activation_memory"]
    if activation["measured_bytes_per_layer"] != activation["formula_bytes_per_layer"]:
        fail(f"activation bytes per layer {activation['measured_bytes_per_layer']}, "
             f"formula {activation['formula_bytes_per_layer']}", output)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    parser.add_argument("--expect-exit", type=int, default=0)
    parser.add_argument("--expect-no-report", action="store_true")
    parser.add_argument("--field", action="append", default=[])
    parser.add_argument("--expect-straggler", type=int)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command and args.command[0] == "--" else args.command
    if os.path.exists(args.json):
        os.remove(args.json)
    run = subprocess.run(command, capture_output=True, text=True, timeout=240)
    output = "$ " + " ".join(command) + "\n" + run.stdout + run.stderr
    if run.returncode != args.expect_exit:
        fail(f"exit status {run.returncode}, expected {args.expect_exit}", output)

    if args.expect_exit != 0:
        # mpirun adds its own banner about the non-zero exit; parbench's lines start with a tag.
        errors = [line for line in run.stderr.splitlines() if line.startswith(("error:", "warning:"))]
        if len(errors) != 1 or not errors[0].startswith("error: "):
            fail(f"expected exactly one 'error:' line from parbench on stderr, got {len(errors)}", output)
        if args.expect_no_report and os.path.exists(args.json):
            fail("a report was written for a refused run", output)
        print("ok: " + errors[0])
        return

    with open(args.json) as handle:
        report = json.load(handle)
    if report.get("schema") != "parbench.report/v1" or report.get("command") != "train":
        fail("not a train report", output)
    try:
        jsonschema.validate(report, json.load(open(SCHEMA)))
    except jsonschema.ValidationError as error:
        fail(f"report does not follow schemas/report.schema.json: {error.message} at {list(error.absolute_path)}",
             output)
    results = report["results"]
    if len(results) != 1:
        fail(f"{len(results)} results, expected 1", output)
    result = results[0]
    for key in REQUIRED:
        if key not in result:
            fail(f"results[0] lacks '{key}'", output)
    if len(result["step_time_samples_ms"]) != result["steps"]:
        fail("one step time sample per timed step expected", output)
    if len(result["loss"]) != result["steps"] + result["warmup"]:
        fail("one loss per step expected", output)
    for key in ["params", "grads", "optimizer", "activations_peak", "total_peak"]:
        if not result["memory_bytes"][key] > 0:
            fail(f"memory_bytes.{key} is not positive", output)
    # The buffer-aware theory (theory/memory.hpp) predicts the ledger: within 2% per category.
    predicted = result["memory_predicted_bytes"]
    for measured_key, predicted_key in [("params", "params"), ("grads", "grads"), ("optimizer", "optimizer"),
                                        ("activations_peak", "activations"), ("total_peak", "total")]:
        measured, theory = result["memory_bytes"][measured_key], predicted[predicted_key]
        if abs(measured - theory) > 0.02 * theory:
            fail(f"memory {measured_key}: measured {measured} B, buffer-aware theory {theory} B: more than 2% apart",
                 output)
    if "--check" in command or "-c" in command:
        check = result.get("check")
        if not check or check.get("passed") is not True:
            fail(f"check did not pass: {check}", output)
    check_comm(result, output)
    check_memory_check(result, output, "--check" in command or "-c" in command)
    if result["layout"].get("cp", 1) > 1:
        check_context(result, output)
    if args.expect_straggler is not None:
        straggler = result["stragglers"]
        if straggler is None or straggler["rank"] != args.expect_straggler or straggler["consistent"] is not True:
            fail(f"rank {args.expect_straggler} was slowed, but the report names {straggler}", output)
        named = f"rank {args.expect_straggler} on host {straggler['host']}"
        if not any(named in warning for warning in result["warnings"]) or named not in run.stderr:
            fail(f"no warning names {named}", output)
    for field in args.field:
        path, expected = field.split("=", 1)
        actual = lookup(result, path)
        if actual != json.loads(expected):
            fail(f"{path} = {json.dumps(actual)}, expected {expected}", output)
    print(f"ok: {result['layout']['scheme']} dp={result['layout']['dp']} "
          f"median {result['step_time_ms']['median']:.2f} ms, "
          f"memory {result['memory_bytes']['total_peak']} B = theory {predicted['total']:.0f} B, check {result.get('check', {}).get('passed')}")


if __name__ == "__main__":
    main()
