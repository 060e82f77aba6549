#!/usr/bin/env python3
"""Runs a command under the NVTX recorder and checks the ranges it opened.

    check_nvtx_ranges.py --recorder LIB --log-dir DIR demo -- COMMAND...
    check_nvtx_ranges.py --recorder LIB --log-dir DIR collective --collective allreduce \
        --sizes 8,16,32,64 --warmup 2 --iters 3 -- COMMAND...

Every process writes its own log (PARBENCH_NVTX_LOG=DIR/nvtx.%p.log). Each log must be
well formed (per thread, every pop closes the innermost open range of the same domain, and
nothing is left open), then the tree of ranges must have the shape the mode describes.
"""
import argparse
import glob
import os
import subprocess
import sys

DOMAIN = "parbench"


class Range:
    def __init__(self, domain, name, parent):
        self.domain, self.name, self.parent, self.children = domain, name, parent, []

    def walk(self):
        for child in self.children:
            yield child
            yield from child.walk()

    def path(self):
        node, names = self, []
        while node is not None and node.name is not None:
            names.append(node.name)
            node = node.parent
        return " > ".join(reversed(names))


def parse(path):
    """Returns {thread: root Range} after checking that the log nests properly."""
    roots, open_ranges = {}, {}
    with open(path) as log:
        for number, line in enumerate(log, 1):
            fields = line.rstrip("\n").split(" ", 3)
            if len(fields) < 3 or fields[1] not in ("push", "pop"):
                raise SystemExit(f"{path}:{number}: malformed line: {line!r}")
            thread, event, domain = fields[0], fields[1], fields[2]
            root = roots.setdefault(thread, Range(None, None, None))
            current = open_ranges.setdefault(thread, root)
            if event == "push":
                child = Range(domain, fields[3] if len(fields) > 3 else "", current)
                current.children.append(child)
                open_ranges[thread] = child
            else:
                if current is root:
                    raise SystemExit(f"{path}:{number}: pop in domain {domain} with no open range")
                if current.domain != domain:
                    raise SystemExit(f"{path}:{number}: pop in domain {domain} closes '{current.path()}' "
                                     f"of domain {current.domain}")
                open_ranges[thread] = current.parent
    for thread, current in open_ranges.items():
        if current is not roots[thread]:
            raise SystemExit(f"{path}: thread {thread} left '{current.path()}' open")
    return roots


def fail(path, message):
    raise SystemExit(f"{path}: {message}")


def ours(node):
    return [child for child in node.children if child.domain == DOMAIN]


def named(nodes, name):
    return [node for node in nodes if node.name == name]


def check_demo(path, roots):
    tops = sorted((top.name for root in roots.values() for top in ours(root)))
    if tops != ["other thread", "run demo"]:
        fail(path, f"top-level ranges {tops}, expected 'run demo' and 'other thread' on separate threads")
    run = next(top for root in roots.values() for top in ours(root) if top.name == "run demo")
    point = named(ours(run), "demo 8B")
    if len(point) != 1:
        fail(path, "'run demo' must hold one 'demo 8B'")
    warmups, iterations = named(ours(point[0]), "warmup"), named(ours(point[0]), "iteration")
    if len(warmups) != 1 or len(iterations) != 3:
        fail(path, f"'demo 8B' holds {len(warmups)} warmup and {len(iterations)} iteration ranges, expected 1 and 3")
    for phase in warmups + iterations:
        if [child.name for child in ours(phase)] != ["allreduce"]:
            fail(path, f"'{phase.path()}' must hold exactly one 'allreduce'")


def check_collective(path, roots, args):
    op = args.collective
    runs = [top for root in roots.values() for top in ours(root) if top.name.startswith("run ")]
    if len(runs) != 1 or runs[0].name != f"run {op}":
        fail(path, f"expected one top-level 'run {op}', found {[run.name for run in runs]}")
    run = runs[0]
    # A point is named "<op> <bytes>B <placement>"; each size is measured out of place, then in place.
    placements = args.placements.split(",")

    def point_of(name):
        words = name.split(" ")
        if len(words) == 3 and words[0] == op and words[1].endswith("B") and words[1][:-1].isdigit():
            return int(words[1][:-1]), words[2]
        return None

    points = [node for node in run.walk() if node.domain == DOMAIN and point_of(node.name)]
    found = [point_of(node.name) for node in points]
    expected = [(int(size), placement) for size in args.sizes.split(",") for placement in placements]
    if found != expected:
        fail(path, f"size points {found} under '{run.name}', expected {expected} in that order")
    for point in points:
        if any(point_of(node.name) for node in point.walk()):
            fail(path, f"'{point.path()}' holds another size point")
        warmups = named(ours(point), "warmup")
        if len(warmups) != 1:
            fail(path, f"'{point.path()}' holds {len(warmups)} 'warmup' ranges, expected 1")
        warmup_ops = named(ours(warmups[0]), op)
        if len(warmup_ops) != args.warmup:
            fail(path, f"'{warmups[0].path()}' holds {len(warmup_ops)} '{op}' calls, expected --warmup {args.warmup}")
        timed = named(ours(point), "iteration") + named(ours(point), "batch")
        if len(timed) != args.iters:
            fail(path, f"'{point.path()}' holds {len(timed)} iteration/batch ranges, expected --iters {args.iters}")
        for sample in timed:
            calls = len(named(ours(sample), op))
            if calls == 0 or (sample.name == "iteration" and calls != 1):
                fail(path, f"'{sample.path()}' holds {calls} '{op}' calls, expected one per iteration")
    # A communicator call is a leaf of parbench's tree: nothing of ours opens inside it.
    # (Calls outside the phases exist: the control-plane reductions of the samples.)
    for node in run.walk():
        if node.domain == DOMAIN and node.name == op and ours(node):
            fail(path, f"'{node.path()}' holds '{ours(node)[0].name}': communicator calls must not nest")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recorder", required=True, help="the NVTX injection library")
    parser.add_argument("--log-dir", required=True)
    modes = parser.add_subparsers(dest="mode", required=True)
    modes.add_parser("demo")
    collective = modes.add_parser("collective")
    collective.add_argument("--collective", required=True)
    collective.add_argument("--sizes", required=True, help="comma-separated bytes of the size points")
    collective.add_argument("--warmup", type=int, required=True)
    collective.add_argument("--iters", type=int, required=True)
    collective.add_argument("--placements", default="out-of-place,in-place",
                            help="the placements measured per size, in order (parbench's default: both)")
    collective.add_argument("command", nargs=argparse.REMAINDER)
    args, rest = parser.parse_known_args()
    command = getattr(args, "command", None) or rest
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        parser.error("give the command to run after --")

    os.makedirs(args.log_dir, exist_ok=True)
    for old in glob.glob(os.path.join(args.log_dir, "nvtx.*.log")):
        os.remove(old)
    environment = dict(os.environ, NVTX_INJECTION64_PATH=args.recorder,
                       PARBENCH_NVTX_LOG=os.path.join(args.log_dir, "nvtx.%p.log"))
    result = subprocess.run(command, env=environment)
    if result.returncode != 0:
        raise SystemExit(f"the command exited with {result.returncode}: {' '.join(command)}")
    logs = sorted(glob.glob(os.path.join(args.log_dir, "nvtx.*.log")))
    # mpirun itself loads no NVTX; each rank of parbench writes one log.
    if not logs:
        raise SystemExit("no NVTX log was written: the recorder was not loaded (is NVTX compiled in?)")
    for path in logs:
        roots = parse(path)
        if args.mode == "demo":
            check_demo(path, roots)
        else:
            check_collective(path, roots, args)
    print(f"NVTX ranges well formed and nested as expected in {len(logs)} log(s)")


if __name__ == "__main__":
    main()
