#!/usr/bin/env python3
"""Runs every command line of a Markdown document, so an example that fails as written
fails CI.

A command line is a line of a code block (indented by four spaces or fenced) whose first
word, after any VAR=value prefixes, is mpirun, srun, nsys, parbench, build/parbench*,
export or scripts/...; prose and inline code are not commands. Lines run in order in one
scratch folder per document, so a report written by one line can be read by a later one.

What a line needs decides what happens to it:
  - a trailing comment holding [GPU], [hosts], [Nsight] or [peers] marks a line this
    machine cannot run as written: its parbench part is checked with `parbench --dry-run`
    (flags parsed and validated, nothing run), a script's with `--help`;
  - otherwise it runs, reduced where needed with the same flags: collectives at 1
    iteration and at most 64 KiB, training at 1 step without warm-up and a 16-token
    sequence, mpirun with
    --allow-run-as-root --oversubscribe, parbench-ops at a short minimum time, a sweep
    file's runs reduced the same way, scripts/dev/fuzz.sh TARGET SECONDS at 3 seconds;
  - reports a line reads (`compare A.json B.json`, `plot.py X.json`) that no earlier line
    wrote are first produced by a small collective run;
  - scripts/setup.sh and scripts/test.sh are what CI runs to get here: they are checked
    to exist and be executable; scripts/run.sh ARGS runs its mpirun part (after setup it
    execs `mpirun -np N build/parbench ARGS`) at 2 ranks.

Python scripts run as the documents show them, through their `#!/usr/bin/env python3`: the
python3 on PATH, whatever it is (the plotting scripts find matplotlib themselves).

Usage: run_doc_commands.py DOC.md --parbench BIN [--mpiexec "MPIEXEC"]
       run_doc_commands.py DOC.md --list         (the command lines found; nothing run)
"""
import argparse
import json
import os
import shutil
import re
import shlex
import subprocess
import sys
import tempfile
import time

MARKERS = ("[gpu]", "[hosts]", "[nsight]", "[peers]")
COLLECTIVES = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "alltoallv", "gather",
               "scatter", "sendrecv", "all"}
MAX_BYTES = 64 << 10
SIZE_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def joined_lines(text):
    """(first line number, line) with shell continuations (a trailing backslash) joined."""
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.rstrip().endswith("\\"):
            if not pending:
                start = number
            pending += line.rstrip()[:-1].rstrip() + " " if not pending else line.strip()[:-1].rstrip() + " "
            continue
        if pending:
            yield start, pending + line.strip()
            pending = ""
        else:
            yield number, line
    if pending:
        yield start, pending


def command_lines(text):
    """(line number, command, comment) for every command line of the document's code blocks."""
    found, fenced, previous_blank = [], False, True
    in_indented = False
    for number, line in joined_lines(text):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            if not stripped:
                previous_blank = True
                continue
            if line.startswith("    ") and (previous_blank or in_indented) and not stripped.startswith(("-", "*", "|")):
                in_indented = True
            else:
                in_indented = False
                previous_blank = False
                continue
            previous_blank = False
        command, comment = split_comment(stripped)
        if is_command(command):
            found.append((number, command, comment))
    return found


def split_comment(line):
    """The command and its trailing '#' comment (a '#' outside quotes after a space)."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=False)
        lexer.whitespace_split = True
        lexer.commenters = ""
    except ValueError:
        return line, ""
    match = re.search(r"(^|\s)#(?=\s|$)|\s#\s", line)
    if not match:
        return line, ""
    return line[:match.start()].strip(), line[match.end():].strip()


def is_command(command):
    words = command.split()
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words = words[1:]
    if not words:
        return False
    first = words[0]
    return (first in ("mpirun", "srun", "nsys", "parbench", "export") or first.startswith("build/parbench")
            or first.startswith("scripts/"))


def parse_bytes(text):
    match = re.fullmatch(r"(\d+)([KMG]?)", text)
    return int(match.group(1)) * SIZE_SUFFIX.get(match.group(2), 1) if match else None


def set_option(args, names, value):
    """Replace the value of the first of `names` present, else append names[0] value."""
    for i, word in enumerate(args):
        if word in names and i + 1 < len(args):
            args[i + 1] = value
            return args
        for name in names:
            if name.startswith("--") and word.startswith(name + "="):
                args[i] = f"{name}={value}"
                return args
    return args + [names[0], value]


def reduce_parbench(args):
    """A parbench argument list reduced in cost, its flags kept."""
    if not args:
        return args
    command = args[0]
    if command in COLLECTIVES:
        args = set_option(args, ("--iters", "-n"), "1")
        args = set_option(args, ("--warmup", "-w"), "0")
        for names in (("--size",), ("-e", "--max-bytes"), ("-b", "--min-bytes")):
            for i, word in enumerate(args[:-1]):
                size = parse_bytes(args[i + 1]) if word in names else None
                if size is not None and size > MAX_BYTES:
                    args[i + 1] = str(MAX_BYTES)
    elif command == "train" and "--print-schedule" not in args:
        args = set_option(args, ("--steps",), "1")
        args = set_option(args, ("--warmup",), "0")
        # A short sequence for GPT models: the layout, batch and stage checks do not depend on it.
        if model_kind(args) == "gpt":
            args = set_option(args, ("--seq",), "16")
    return args


def model_kind(args):
    """The "kind" of the model a train line names (a configs/models name or a path)."""
    name = next((args[i + 1] for i, w in enumerate(args[:-1]) if w == "--model"), "gpt-tiny")
    for path in (name, os.path.join(ROOT, "configs", "models", name + ".json")):
        if os.path.isfile(path):
            return json.load(open(path)).get("kind")
    return None


class Runner:
    def __init__(self, parbench, mpiexec, workdir):
        self.parbench = parbench
        self.mpiexec = mpiexec
        self.workdir = workdir
        self.env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        self.binaries = {"parbench": parbench,
                         "parbench-ops": os.path.join(os.path.dirname(parbench), "parbench-ops")}

    def run(self, argv, timeout=600):
        return subprocess.run(argv, cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def binary(self, word):
        name = os.path.basename(word)
        return self.binaries.get(name) if name in self.binaries else None

    def ensure_reports(self, args):
        """Reports this line reads and no earlier line wrote: produce them first."""
        outputs = {args[i + 1] for i, w in enumerate(args[:-1]) if w in ("--json", "--csv", "--trace", "-o", "--out")}
        for word in args:
            if word.endswith(".json") and word not in outputs and not os.path.exists(os.path.join(self.workdir, word)):
                result = self.run(self.mpiexec + ["-np", "1", self.parbench, "allreduce", "-b", "1K", "-e", "4K",
                                                  "--iters", "2", "--json", word])
                if result.returncode != 0:
                    raise AssertionError(f"could not produce {word}: {result.stderr}")

    def split_launcher(self, words):
        """(launcher words, program index) for mpirun/srun lines."""
        for i, word in enumerate(words):
            if self.binary(word) or word.startswith("scripts/") or word.endswith(".py"):
                return words[:i], i
        return words, len(words)

    def execute(self, command, comment):
        words = shlex.split(command)
        env_prefix = {}
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            key, value = words.pop(0).split("=", 1)
            env_prefix[key] = value
        if words[0] == "export":
            for assignment in words[1:]:
                key, value = assignment.split("=", 1)
                self.env[key] = value
            return "exported"
        dry = any(marker in comment.lower() for marker in MARKERS)
        if words[0] == "nsys":
            if not dry:
                raise AssertionError("an Nsight line must be marked [Nsight]")
            words = words[words.index("profile") + 1:] if "profile" in words else words[1:]
            while words and words[0].startswith("-"):
                words = words[1:]
        launcher, index = self.split_launcher(words) if words[0] in ("mpirun", "srun") else ([], 0)
        program, args = words[index], words[index + 1:]
        saved = dict(self.env)
        self.env.update(env_prefix)
        try:
            return self.execute_program(launcher, program, args, dry)
        finally:
            self.env = saved

    def execute_program(self, launcher, program, args, dry):
        name = os.path.basename(program)
        if program.startswith("scripts/"):
            return self.execute_script(program, args, dry)
        binary = self.binary(program)
        if binary is None:
            raise AssertionError(f"unknown program {program}")
        if name == "parbench-ops":
            if dry:
                return "parbench-ops not run"
            args = [a for a in args if not a.startswith("--benchmark_min_time")] + ["--benchmark_min_time=0.001"]
            return self.checked(self.run([binary, *args]))
        if dry:
            return self.checked(self.run([binary, "--dry-run", *args]))
        args = reduce_parbench(list(args))
        self.ensure_reports(args)
        ranks = None
        if launcher:
            if launcher[0] != "mpirun":
                raise AssertionError(f"{launcher[0]} lines must be marked (this machine runs mpirun)")
            ranks = next((launcher[i + 1] for i, w in enumerate(launcher[:-1]) if w in ("-np", "-n")), "1")
            extra = [w for w in launcher[1:] if w not in ("--oversubscribe", "--allow-run-as-root")]
            argv = self.mpiexec + extra + [binary, *args]
        else:
            argv = [binary, *args]
        return self.checked(self.run(argv), ranks)

    def execute_script(self, program, args, dry):
        path = os.path.join(ROOT, program)
        if not os.access(path, os.X_OK):
            raise AssertionError(f"{program} is not an executable script")
        name = os.path.basename(program)
        if name in ("setup.sh", "test.sh"):
            return "run by CI itself"
        if dry:
            return self.checked(self.run([path, "--help"]))
        if name == "run.sh":
            return self.execute_program(["mpirun", "-np", "2"], "parbench", args, False)
        if name == "sweep.sh":
            return self.execute_sweep(path, args)
        if name == "fuzz.sh" and len(args) == 2:
            args = [args[0], "3"]  # a fuzzing campaign, cut to seconds: the same target, built and run
        for word in args:
            if word.endswith(".json"):
                self.ensure_reports([word])
        # As the document shows it: the script itself, under the python3 its #! finds on PATH.
        return self.checked(self.run([path, *args]))

    def execute_sweep(self, path, args):
        sweep = json.load(open(os.path.join(ROOT, args[0])))
        for entry in sweep["runs"]:
            entry["args"] = reduce_parbench(list(entry["args"]))
        reduced = os.path.join(self.workdir, "reduced-sweep.json")
        json.dump(sweep, open(reduced, "w"))
        build = os.path.dirname(os.path.abspath(self.parbench))
        env = dict(self.env, PARBENCH_RESULTS_DIR=self.workdir, PARBENCH_RUN_ID="docs", PARBENCH_BUILD_DIR=build)
        result = subprocess.run([path, reduced, *args[1:]], cwd=self.workdir, env=env, capture_output=True, text=True,
                                timeout=600, stdin=subprocess.DEVNULL)
        return self.checked(result)

    @staticmethod
    def checked(result, ranks=None):
        if result.returncode != 0:
            raise AssertionError(f"exit {result.returncode}\n{result.stdout[-1500:]}\n{result.stderr[-2500:]}")
        return "ok" + (f" ({ranks} ranks)" if ranks else "")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("document")
    parser.add_argument("--parbench", help="the binary to run the lines with (needed unless --list)")
    parser.add_argument("--mpiexec", default="mpirun --allow-run-as-root --oversubscribe")
    parser.add_argument("--list", action="store_true", help="print the command lines found and exit")
    args = parser.parse_args()
    if not args.list and not args.parbench:
        parser.error("--parbench BIN is needed to run the lines (or --list to only print them)")
    lines = command_lines(open(args.document).read())
    if args.list:
        for number, command, comment in lines:
            print(f"{number}: {command}" + (f"   # {comment}" if comment else ""))
        return 0
    workdir = tempfile.mkdtemp(prefix="parbench-docs-")
    runner = Runner(os.path.abspath(args.parbench), args.mpiexec.split(), workdir)
    failures = 0
    try:
        for number, command, comment in lines:
            started = time.monotonic()
            try:
                outcome = runner.execute(command, comment)
                print(f"{os.path.basename(args.document)}:{number}: {outcome} in {time.monotonic() - started:.1f} s: "
                      f"{command}", flush=True)
            except (AssertionError, subprocess.TimeoutExpired, ValueError, IndexError) as error:
                failures += 1
                print(f"FAILED {os.path.basename(args.document)}:{number}: {command}\n{error}", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{len(lines)} command lines, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
