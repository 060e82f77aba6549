#!/usr/bin/env python3
"""Checks a --trace file: Chrome trace JSON with one track per rank.

    check_trace.py TRACE.json RANKS MICROBATCHES [SCHEMA.json]

Every rank names its process and has F and B events ("X", ts/dur in us) for every
micro-batch, each with args.microbatch and args.stage; timestamps are non-negative. With a
schema (schemas/trace.schema.json) the file is validated against it too, and a finished run's
trace must say it is complete, with every timed step traced.
"""
import json
import sys


def main():
    path, ranks, microbatches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path) as f:
        trace = json.load(f)
    if len(sys.argv) > 4:
        import jsonschema
        jsonschema.validate(trace, json.load(open(sys.argv[4])))
        about = trace["otherData"]
        if about["status"] != "complete" or about["timed_steps_traced"] != about["timed_steps"]:
            sys.exit(f"FAIL: a finished run's trace says {about}")
    events = trace["traceEvents"]
    names = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    if names != set(range(ranks)):
        sys.exit(f"FAIL: process names for ranks {sorted(names)}, expected 0..{ranks - 1}")
    complete = [e for e in events if e["ph"] == "X"]
    for e in complete:
        if e["ts"] < 0 or e["dur"] < 0 or not isinstance(e["tid"], int):
            sys.exit(f"FAIL: bad event {e}")
    for rank in range(ranks):
        mine = [e for e in complete if e["pid"] == rank and e["cat"] == "compute"]
        for kind in ("F", "B"):
            seen = {e["args"]["microbatch"] for e in mine if e["name"].startswith(kind)}
            if seen != set(range(microbatches)):
                sys.exit(f"FAIL: rank {rank} {kind} for micro-batches {sorted(seen)}")
        if any("stage" not in e["args"] for e in mine):
            sys.exit(f"FAIL: rank {rank}: a compute event without args.stage")
    print(f"ok: {len(complete)} events on {ranks} tracks")


if __name__ == "__main__":
    main()
