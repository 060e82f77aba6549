#!/usr/bin/env python3
"""Fuzz target for the sweep file reader (scripts/sweep_file.py): any bytes either give runs
that sweep.sh can run safely, or one SweepError line; anything else (another exception, a
message of several lines, a run breaking the rules) is a crash.

    scripts/dev/fuzz.sh sweep SECONDS [RUNS]       # atheris (libFuzzer for Python), in build-fuzz/
    fuzz_sweep.py --replay tests/fuzz/corpus/sweep   # each file once, plain Python (CTest)
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
REPLAY = len(sys.argv) == 3 and sys.argv[1] == "--replay"
if REPLAY:
    import sweep_file  # noqa: E402
else:
    import atheris  # only the fuzzer needs it (scripts/dev/fuzz.sh installs it in a virtual environment)

    # Coverage of the reader guides the mutations (instrumenting jsonschema too would slow each
    # execution several times over; the seed corpus holds an input for each of its failures).
    with atheris.instrument_imports(include=["sweep_file"]):
        import sweep_file  # noqa: E402

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class BrokenRule(Exception):
    """The reader accepted or refused an input the wrong way."""


def require(condition, what, data):
    if not condition:
        raise BrokenRule(f"{what} (input {data[:200]!r})")


def check_one(data):
    try:
        runs = sweep_file.parse_sweep(data)
    except sweep_file.SweepError as error:
        message = str(error)
        require(message and "\n" not in message and "\r" not in message, f"message not one line: {message!r}", data)
        require(len(message) < 1000, f"message of {len(message)} characters", data)
        return
    require(runs, "accepted a sweep without runs", data)
    names = set()
    for run in runs:
        require(SAFE_NAME.fullmatch(run.name) and run.name.lower() != "manifest", f"name {run.name!r}", data)
        require(run.name.lower() not in names, f"name {run.name!r} twice", data)
        names.add(run.name.lower())
        require(type(run.ranks) is int and 1 <= run.ranks <= 65536, f"ranks {run.ranks!r}", data)
        require(run.args and all(type(a) is str and not CONTROL.search(a) for a in run.args), f"args {run.args!r}", data)
        require(not any(a.split("=", 1)[0] in sweep_file.OWN_FLAGS for a in run.args), "--json/--csv passed", data)
    # What sweep.sh reads back is exactly the runs: fields never split or join.
    fields = sweep_file.encode(runs).split(b"\0")
    require(fields[-1] == b"", "encoding does not end with a NUL", data)
    fields = [f.decode("utf-8") for f in fields[:-1]]
    decoded = []
    while fields:
        name, ranks, count, rest = fields[0], int(fields[1]), int(fields[2]), fields[3:]
        decoded.append(sweep_file.Run(name, ranks, tuple(rest[:count])))
        fields = rest[count:]
    require(decoded == runs, "encoding does not decode to the runs", data)


def replay(folder):
    names = sorted(os.listdir(folder))
    for name in names:
        with open(os.path.join(folder, name), "rb") as corpus_file:
            check_one(corpus_file.read())
    print(f"replayed {len(names)} inputs of {folder}: no crash")
    return 0 if names else 1


def main():
    if REPLAY:
        return replay(sys.argv[2])
    sweep_file.validator()  # the schema read once, before the fuzzer counts time
    atheris.Setup(sys.argv, check_one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
