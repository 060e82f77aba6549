#!/usr/bin/env python3
"""Reads the reports scripts/gpu/gpu_check.sh makes, asserts what each must say, and prints the
line the summary quotes. Every collective or training report read here must say which backend
ran it: nccl, or mpi for the CPU runs the GPU runs are held to; a report that says otherwise
fails its step (a GPU check that quietly ran on the CPU must not pass).

    gpu_check_reports.py info FILE [--no-gpu]
    gpu_check_reports.py backend BACKEND FILE...
    gpu_check_reports.py collectives FILE
    gpu_check_reports.py mfu FILE
    gpu_check_reports.py losses GPU_FILE CPU_FILE LIMIT
    gpu_check_reports.py graph LAUNCHED_FILE GRAPHED_FILE
    gpu_check_reports.py background BACKEND FILE...

Exits 0 when every assertion holds, 1 (with the reason) when one does not.
"""
import json
import math
import sys

# NCCL hands these to a copy at one rank (collectives/one_rank_shortcut.hpp).
ONE_RANK_COPIES = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce"}


class Failed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Failed(message)


def load(path, backend=None):
    try:
        with open(path) as file:
            report = json.load(file)
    except (OSError, ValueError) as error:
        raise Failed(f"{path}: cannot read the report: {error}")
    if backend is not None:
        said = report.get("environment", {}).get("backend")
        expect(said == backend, f"{path}: backend {said!r}, not {backend}: this run did not measure what its step claims")
        expect(report.get("status") == "complete", f"{path}: status {report.get('status')!r} "
               f"({report.get('progress', '')}), not complete")
    return report


def info(path, no_gpu=False):
    report = load(path)
    for host in report["hosts"]:
        gpu = host["gpu"]
        versions = f"driver {gpu.get('cuda_driver')}, CUDA runtime {gpu.get('cuda_runtime')}, NCCL {gpu.get('nccl')}"
        if no_gpu:
            expect(gpu["built_with_cuda"], f"{path}: {host['name']}: this parbench was built without CUDA")
            expect(not gpu["devices"], f"{path}: {host['name']} lists GPUs where none should be")
            expect(gpu.get("unavailable_reason"), f"{path}: {host['name']}: no GPU, and no reason given")
            print(f"{host['name']}: no GPU ({gpu['unavailable_reason']}); {versions}")
            continue
        expect(gpu["devices"], f"{path}: {host['name']}: no GPU listed ({gpu.get('unavailable_reason')})")
        expect(gpu.get("nccl"), f"{path}: {host['name']}: no NCCL version")
        names = ", ".join(f"{d['name']} (sm {d['compute_capability']}, {d['memory_bytes'] / 2**30:.0f} GiB)"
                          for d in gpu["devices"])
        print(f"{host['name']}: {names}; {versions}")


def backend(expected, paths):
    for path in paths:
        load(path, expected)
    print(f"{len(paths)} report(s) say backend {expected}")


def collectives(path):
    report = load(path, "nccl")
    ranks = report["environment"]["world_size"]
    results = report["results"]
    summary = report["summary"]
    expect(summary["checked"] and summary["wrong_total"] == 0,
           f"{path}: validation {summary['status']}, {summary['wrong_total']} wrong elements")
    measured = [r for r in results if r.get("skipped") is None]
    expect(measured, f"{path}: no point was measured")
    labelled = sorted({r["collective"] for r in measured if r.get("one_rank_shortcut")})
    if ranks == 1:
        missing = sorted({r["collective"] for r in measured
                          if r["collective"] in ONE_RANK_COPIES and not r.get("one_rank_shortcut")})
        expect(not missing, f"{path}: one-rank points of {', '.join(missing)} are not labelled as NCCL's copy")
        nonzero = sorted({r["collective"] for r in measured if r.get("one_rank_shortcut") and r["busbw_gbps"] != 0})
        expect(not nonzero, f"{path}: one-rank copies of {', '.join(nonzero)} report a busbw other than 0")
        wrong = sorted(set(labelled) - ONE_RANK_COPIES)
        expect(not wrong, f"{path}: {', '.join(wrong)} labelled as a copy, but NCCL runs them")
    else:
        expect(not labelled, f"{path}: {', '.join(labelled)} labelled as one-rank copies at {ranks} ranks")
    collective_names = sorted({r["collective"] for r in measured})
    peak = summary.get("peak") or {}
    line = (f"{len(measured)} points of {len(collective_names)} collectives at {ranks} rank(s), 0 wrong elements; "
            f"peak busbw {peak.get('busbw_gbps', 0):.1f} GB/s ({peak.get('collective')} {peak.get('bytes')} B)")
    if labelled:
        line += f"; labelled as one-rank copies: {', '.join(labelled)}"
    print(line)


def mfu(path):
    report = load(path, "nccl")
    result = report["results"][0]
    expect(result["precision"] == "bf16", f"{path}: precision {result['precision']}, not bf16")
    attention = report["config"]["resolved"]["attention"]
    step = result["step_time_ms"]["median"]
    line = (f"{result['model']} {result['precision']}, {attention} attention, global batch {result['global_batch']} x "
            f"{result['seq_len']} tokens: step {step:.1f} ms (median of {result['steps']}), "
            f"{result['achieved_tflops_per_rank']:.1f} TFLOP/s per GPU, MFU ")
    if result["mfu"] is None:
        line += f"unknown ({result['peak_source']})"
    else:
        line += f"{100 * result['mfu']:.1f}% of {result['peak_tflops_per_rank']:g} TFLOP/s ({result['peak_source']})"
    print(line)


def losses(gpu_path, cpu_path, limit):
    gpu = load(gpu_path, "nccl")["results"][0]["loss"]
    cpu = load(cpu_path, "mpi")["results"][0]["loss"]
    expect(len(gpu) == len(cpu), f"{len(gpu)} GPU losses against {len(cpu)} CPU losses")
    print(f"GPU losses {gpu}\nCPU losses {cpu}")
    expect(all(isinstance(x, (int, float)) and math.isfinite(x) for x in gpu + cpu), "a loss is not finite")
    worst = max(abs(g - c) / abs(c) for g, c in zip(gpu, cpu))
    expect(worst <= limit, f"GPU and CPU losses differ by {worst:.2e} relative, over the limit {limit:g}")
    print(f"GPU against CPU: largest relative difference {worst:.2e} (limit {limit:g})")


def graph(launched_path, graphed_path):
    launched = load(launched_path, "nccl")
    graphed = load(graphed_path, "nccl")
    expect(graphed["config"].get("graph") is True,
           f"{graphed_path}: not a --graph run")
    times = {}
    for name, report in (("launched", launched), ("graphed", graphed)):
        for r in report["results"]:
            if r.get("skipped") is None and not r["inplace"]:
                times.setdefault(r["bytes"], {})[name] = r["reported_time_us"]
    rows = [(size, t["launched"], t["graphed"]) for size, t in sorted(times.items()) if len(t) == 2]
    expect(rows, "no size measured both ways")
    for size, one, other in rows:
        print(f"  {size:>10} B  launched {one:9.2f} us  graph {other:9.2f} us  ({other / one:.2f}x)")
    size, one, other = rows[0]
    collective = launched["results"][0]["collective"]
    print(f"{collective} at {size} B: {one:.2f} us launched, {other:.2f} us replayed from a CUDA graph")


def background(expected, paths):
    """--background runs: every point measured under its load, checked right under it, and the
    load's throughput taken alone and beside the collective."""
    for path in paths:
        report = load(path, expected)
        expect(report["summary"]["checked"], f"{path}: not a --check run: nothing says the data stayed right")
        ranks = report["environment"]["world_size"]
        measured = [r for r in report["results"] if r.get("skipped") is None]
        expect(measured, f"{path}: no point was measured")
        for r in measured:
            b = r.get("background")
            expect(b, f"{path}: {r['collective']} {r['bytes']} B has no background figures")
            expect(r["wrong"] == 0 and b["wrong_loaded"] == 0,
                   f"{path}: {r['collective']} {r['bytes']} B: {b['wrong_loaded']} wrong elements under {b['load']}")
            units = b["load_units"]
            expect(units["alone"] > 0 and units["with_collective"] > 0,
                   f"{path}: {b['load']} did no work ({units['alone']} units alone, {units['with_collective']} beside)")
            # An all-reduce's busbw is 0 at one rank (2 (n-1)/n); every other load's rate is positive.
            if not (b["load"].startswith("collective") and ranks == 1):
                expect(b["load_alone"] > 0 and b["load_with_collective"] > 0, f"{path}: {b['load']}: no throughput")
            expect(b["time_loaded_us"] > 0 and abs(b["slowdown"] * b["time_alone_us"] - b["time_loaded_us"])
                   <= 1e-6 * b["time_loaded_us"], f"{path}: slowdown {b['slowdown']} is not loaded / alone")
        r = max(measured, key=lambda r: (r["bytes"], not r["inplace"]))
        b = r["background"]
        print(f"{r['collective']} {r['bytes']} B at {ranks} rank(s) under {b['load']}: {b['time_alone_us']:.1f} -> "
              f"{b['time_loaded_us']:.1f} us (x{b['slowdown']:.2f}); load {b['load_alone']:.1f} -> "
              f"{b['load_with_collective']:.1f} {b['unit']}; 0 wrong under load")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    command, args = argv[1], argv[2:]
    try:
        if command == "info":
            info(args[0], no_gpu="--no-gpu" in args[1:])
        elif command == "backend":
            backend(args[0], args[1:])
        elif command == "collectives":
            collectives(args[0])
        elif command == "mfu":
            mfu(args[0])
        elif command == "losses":
            losses(args[0], args[1], float(args[2]))
        elif command == "graph":
            graph(args[0], args[1])
        elif command == "background":
            background(args[0], args[1:])
        else:
            sys.exit(__doc__)
    except Failed as failure:
        print(f"FAILED: {failure}")
        return 1
    except (KeyError, IndexError, TypeError) as error:
        print(f"FAILED: a report lacks what this check reads ({error!r})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
