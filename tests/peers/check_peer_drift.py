#!/usr/bin/env python3
"""The peer-drift guard (scripts/bench/peer_drift.py), in CI.

1. The judgement on made-up rounds, through the real `parbench compare`: a tool that reads
   twice the peers' time in every process drifts, at that point only and against both peers;
   one 20 % off peers that agree exactly does not (25 % is agreement); one that sits between two peers that disagree does not; one whose processes fall in two
   modes (half of them twice as slow) does not either, since its interval then holds the peers.
2. The guard itself: parbench against the plain IMB-style and OSU-style loops
   (plain-collectives) at 2 ranks, allreduce, alltoall and reduce at 8 B and 1 MiB per peer,
   must find no drift, with an interval for every verdict (a guard that judged nothing fails).
3. That it catches a drift in parbench's own figures end to end: parbench made slow on purpose
   (its fault injection: one rank sleeps 200 us before each timed call) at alltoall 8 B must be
   judged DRIFT against both peers. (The drift it was made for, parbench's buffers on huge
   pages where the peers' are not, moves a 1 MiB-per-peer alltoall by a factor that depends on
   the CPU, from 2.4x on this project's VM to little elsewhere: measured in
   docs/reproducing.md, not asserted here.)

    check_peer_drift.py --script scripts/bench/peer_drift.py --parbench build/parbench --plain build/plain-collectives
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile


def fail(message):
    sys.exit(f"FAIL: {message}")


def load(script):
    spec = importlib.util.spec_from_file_location("peer_drift", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_judgement(drift, parbench):
    points = [("allreduce", 8), ("alltoall", 1048576)]
    steady = lambda base: [base * (1.0 + 0.01 * k) for k in (0, 3, 1, 2, 4, 1)]

    def verdicts(parbench_times, imb_times, osu_times):
        figures = {point: {"parbench": parbench_times(point), "IMB-style": imb_times(point),
                           "OSU-style": osu_times(point)} for point in points}
        judged = drift.judge(parbench, figures, 2)
        if len(judged) != 4 or drift.unjudged(judged):
            fail(f"made-up rounds of 6 processes a tool: {len(judged)} verdicts, {len(drift.unjudged(judged))} without "
                 f"an interval: {judged}")
        return {(v["collective"], v["bytes"], v["peer"]): v for v in judged}

    alike = verdicts(lambda p: steady(10.0), lambda p: steady(10.0), lambda p: steady(10.2))
    if any(v["drift"] for v in alike.values()):
        fail(f"tools that read alike were judged to drift: {alike}")
    slow = verdicts(lambda p: steady(20.0 if p == ("alltoall", 1048576) else 10.0), lambda p: steady(10.0),
                    lambda p: steady(10.2))
    drifted = sorted(key for key, v in slow.items() if v["drift"])
    if drifted != [("alltoall", 1048576, "IMB-style"), ("alltoall", 1048576, "OSU-style")]:
        fail(f"twice the peers' time at alltoall 1 MiB: drift judged at {drifted}, expected that point against both")
    if not 0.45 < slow[("alltoall", 1048576, "IMB-style")]["ratio"] < 0.55:
        fail(f"the busbw ratio of a tool twice as slow is not 0.5: {slow[('alltoall', 1048576, 'IMB-style')]}")
    near = verdicts(lambda p: steady(12.0), lambda p: steady(10.0), lambda p: steady(10.0))
    if any(v["drift"] for v in near.values()):
        fail(f"20 % from peers that agree exactly was judged a drift (within the 25 % of agreement): {near}")
    between = verdicts(lambda p: steady(15.0), lambda p: steady(10.0), lambda p: steady(20.0))
    if any(v["drift"] for v in between.values()):
        fail(f"a tool between two peers 2x apart was judged to drift: {between}")
    modes = verdicts(lambda p: [10.0, 20.0, 10.2, 20.4, 10.1, 20.2], lambda p: steady(10.0), lambda p: steady(10.2))
    if any(v["drift"] for v in modes.values()):
        fail(f"a tool whose processes fall in two modes, one the peers', was judged to drift: {modes}")
    print("judgement: a systematic 2x is a drift at its point only; 20 %, peers' disagreement and process modes "
          "are not")


def run_guard(script, parbench, plain, rounds, extra, json_path):
    if os.path.exists(json_path):
        os.remove(json_path)  # a run that fails before writing must not be read as the previous one
    command = [sys.executable, script, "--parbench", parbench, "--plain", plain, "--rounds", str(rounds),
               "--json", json_path, *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=240)


def check_live(script, parbench, plain):
    with tempfile.TemporaryDirectory(prefix="peer-drift-test-") as work:
        out = os.path.join(work, "guard.json")
        result = run_guard(script, parbench, plain, 4, [], out)
        print(result.stdout, end="")
        if result.returncode != 0:
            fail(f"the guard found a drift or failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        report = json.load(open(out))
        if len(report["verdicts"]) != 12 or any(v["interval"] is None or v["control_interval"] is None
                                                for v in report["verdicts"]):
            fail(f"{len(report['verdicts'])} verdicts, expected 6 points x 2 peers, each with its intervals")
        if report["parbench_pages"] != ["normal"] and report["thp"]["enabled"] == "madvise":
            fail(f"parbench's default buffers under THP madvise were on {report['parbench_pages']} pages, not normal")
        print("the guard: parbench within its peers' disagreement and the noise at every point")
        # 2 rounds, the fewest the guard takes: a slowdown of some 500x needs no more to stand
        # out of the noise, and CI's time is short.
        result = run_guard(script, parbench, plain, 2, ["--parbench-flags=--inject-straggler 1 --inject-straggler-us 200",
                                                     "--points", "alltoall:8"], out)
        print(result.stdout, end="")
        report = json.load(open(out)) if os.path.exists(out) else {"verdicts": []}
        if result.returncode != 1 or len(report["verdicts"]) != 2 or not all(v["drift"] for v in report["verdicts"]):
            fail(f"parbench slowed by 200 us per call at alltoall 8 B: the guard did not say DRIFT against both peers "
                 f"({result.returncode}):\n{result.stdout}\n{result.stderr}")
        print("the guard catches parbench made slow on purpose (alltoall 8 B, 200 us per call)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--script", required=True)
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--plain", required=True)
    args = parser.parse_args()
    check_judgement(load(args.script), args.parbench)
    check_live(args.script, args.parbench, args.plain)
    print("peer_drift.py: OK")


if __name__ == "__main__":
    main()
