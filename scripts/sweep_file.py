#!/usr/bin/env python3
"""The one reader of sweep files (scripts/sweep.sh's input), checked against
schemas/sweep.schema.json and then for what a schema cannot say: run names unique (ignoring
case, as macOS and Windows file systems do), and --json/--csv left to sweep.sh, which names
the report files after the run.

    python3 scripts/sweep_file.py SWEEP.json

prints the runs for sweep.sh as NUL-terminated fields, so that no character of an argument
can split or join runs: for each run its name, its ranks, its argument count, then each
argument. A bad file prints one line, `error: sweep file PATH: WHERE: WHAT`, and exits 2.
"""
import functools
import json
import os
import sys
from dataclasses import dataclass

import jsonschema

SCHEMA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas", "sweep.schema.json")
# Flags sweep.sh passes itself: the report files take the run's name.
OWN_FLAGS = ("--json", "--csv")
LONGEST_SHOWN = 60  # characters of a bad value quoted in a message


class SweepError(Exception):
    """A sweep file that cannot be run; str() is the one line to print (without "error: ")."""


@dataclass(frozen=True)
class Run:
    name: str
    ranks: int
    args: tuple


@functools.lru_cache(maxsize=1)
def validator():
    with open(SCHEMA, encoding="utf-8") as schema_file:
        schema = json.load(schema_file)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def shown(value):
    """A value as a message quotes it: JSON (control characters escaped), cut short; a list
    or object by its size alone (it may be large or deep)."""
    if isinstance(value, list):
        return f"a list of {len(value)} items" if value else "[]"
    if isinstance(value, dict):
        return f"an object of {len(value)} keys" if value else "{}"
    text = json.dumps(value)
    return text if len(text) <= LONGEST_SHOWN else text[:LONGEST_SHOWN] + "..."


def where(path):
    """runs[2].args[0] from a jsonschema path."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "the top level"


def refuse_constant(name):
    raise SweepError(f"{name} is not a JSON number (write a finite number)")


def no_duplicate_keys(pairs):
    document = {}
    for key, value in pairs:
        if key in document:
            raise SweepError(f"key {shown(key)} appears twice in one object; keep one")
        document[key] = value
    return document


def decode(data):
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SweepError(f"not UTF-8 text (byte {error.start}); save the file as UTF-8") from None
    try:
        return json.loads(data, parse_constant=refuse_constant, object_pairs_hook=no_duplicate_keys)
    except json.JSONDecodeError as error:
        raise SweepError(f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})") from None
    except RecursionError:
        raise SweepError("nested too deeply to be a sweep file") from None
    except ValueError as error:  # an integer literal of more digits than Python converts
        raise SweepError(f"not a usable JSON document: {str(error).splitlines()[0]}") from None


def schema_message(error):
    """The line for the schema violation `error`: its place and the x-message of the
    subschema it broke (which says what a good value is), with the value that broke it."""
    message = error.schema.get("x-message") if isinstance(error.schema, dict) else None
    if error.validator == "required":
        missing = next((key for key in error.validator_value if key not in error.instance), "?")
        return f"{where(error.absolute_path)}: lacks {shown(missing)}; {message or 'add it'}"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(key for key in error.instance if key not in allowed)
        return (f"{where(error.absolute_path)}: unknown key {shown(extra[0] if extra else '?')}; "
                f"the keys are {', '.join(allowed)}")
    return f"{where(error.absolute_path)} is {shown(error.instance)}: {message or error.message}"


def parse_sweep(data):
    """The runs of a sweep file's content (bytes or str); raises SweepError."""
    document = decode(data)
    error = jsonschema.exceptions.best_match(validator().iter_errors(document))
    if error is not None:
        raise SweepError(schema_message(error))
    runs = []
    seen = {}
    for index, run in enumerate(document["runs"]):
        name = run["name"]
        if name.lower() in seen:
            raise SweepError(f"runs[{index}].name: {shown(name)} is also the name of runs[{seen[name.lower()]}] "
                             "(names are compared ignoring case); each run's files take its name, so give it another")
        seen[name.lower()] = index
        for position, argument in enumerate(run["args"]):
            flag = argument.split("=", 1)[0]
            if flag in OWN_FLAGS:
                raise SweepError(f"runs[{index}].args[{position}]: {shown(argument)}: sweep.sh writes "
                                 f"<run-id>/{name}.json and .csv itself; drop {flag}")
        runs.append(Run(name, int(run["ranks"]), tuple(run["args"])))
    return runs


def encode(runs):
    """sweep.sh's input: NUL-terminated fields, name, ranks, argument count, arguments."""
    fields = []
    for run in runs:
        fields += [run.name, str(run.ranks), str(len(run.args)), *run.args]
    return b"".join(field.encode("utf-8") + b"\0" for field in fields)


def main(argv):
    if len(argv) != 2:
        print("usage: sweep_file.py SWEEP.json", file=sys.stderr)
        return 2
    path = argv[1]
    try:
        try:
            with open(path, "rb") as sweep_file:
                data = sweep_file.read()
        except OSError as error:
            raise SweepError(f"cannot read it ({error.strerror}); see configs/sweeps/ for examples") from None
        runs = parse_sweep(data)
    except SweepError as error:
        print(f"error: sweep file {path}: {error}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(encode(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
