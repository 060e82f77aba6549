#!/usr/bin/env python3
"""The layering of src/ (docs/architecture.md): theory/ sits below plan/ and train/.

Rules, checked on every `#include "..."` line of every source file under src/:
  - src/theory includes only core/, theory/ and kernels/*_math.hpp (no MPI, no device,
    no engine, no planner, no output);
  - src/plan includes nothing from train/;
  - src/train includes nothing from plan/;
  - the plan command (cli/plan_command.cpp) includes nothing from train/, the engine;
and on every include line of kernels/ (src/'s sibling, the CUDA kernels and their shared math):
  - kernels/ includes only core/ and kernels/ (its own headers, also by their bare name): what a
    kernel needs of the floors above it (device/'s, comm/'s) would make a folder cycle, since
    device/ includes kernels/.
And on every flag a command declares (add_option/add_flag in src/cli/): the layout flags are
declared once, in cli/layout_flags.cpp, and nowhere else; a flag both commands that take a layout
(train and plan) declare is one of them (but --json, whose documents differ).

Prints the counts it found and every line that breaks a rule; exit status 1 when any does.
--self-test plants bad includes in a temporary tree and fails unless each one is flagged (and a
clean tree passes), so this check can fail."""
import argparse
import pathlib
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# A flag's declaration: add_option("--name", ...), add_flag("-c,--name", ...), the name on the line
# of the call or the next.
DECLARATION = re.compile(r'add_(?:option|flag)\(\s*"([^"]+)"')
LAYOUT_FLAGS = "cli/layout_flags.cpp"
# The commands that take a layout, and the flags both may declare for themselves (with why).
LAYOUT_COMMANDS = ("cli/train_command.cpp", "cli/plan_command.cpp")
OWN_IN_EACH = {"--json": "each command writes its own document (parbench.report/v1, parbench.plan/v1)"}
SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".cu", ".cuh"}
# What src/theory may include: the base layer, itself, and the kernels' host-side math headers.
THEORY_ALLOWED = re.compile(r"^(core/|theory/|kernels/[A-Za-z0-9_]+_math\.hpp$)")
# What kernels/ may include: the base layer and its own headers (by path or by bare name).
KERNELS_ALLOWED = re.compile(r"^(core/|kernels/|[A-Za-z0-9_]+\.(hpp|cuh)$)")


def include_lines(src):
    """(layer, file, line number, included path) for every quoted include under src/ and under
    kernels/ beside it (layer "kernels")."""
    kernels = src.parent / "kernels"
    paths = sorted(src.rglob("*")) + (sorted(kernels.rglob("*")) if kernels.is_dir() else [])
    for path in paths:
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        layer = "kernels" if path.is_relative_to(kernels) else path.relative_to(src).parts[0]
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if match:
                yield layer, path.relative_to(src.parent), number, match.group(1)


def check(src):
    """Returns (counts, violations) for the tree rooted at `src`."""
    counts = {"theory include lines": 0, "theory include lines outside core/, theory/, kernels/*_math.hpp": 0,
              "include lines plan/ -> train/": 0, "include lines train/ -> plan/": 0,
              "include lines cli/plan_command.cpp -> train/": 0,
              "include lines kernels/ -> outside core/ and kernels/": 0}
    violations = []
    for layer, path, number, included in include_lines(src):
        where = f"{path}:{number}: #include \"{included}\""
        if layer == "theory":
            counts["theory include lines"] += 1
            if not THEORY_ALLOWED.match(included):
                counts["theory include lines outside core/, theory/, kernels/*_math.hpp"] += 1
                violations.append(f"{where}: src/theory includes only core/, theory/ and kernels/*_math.hpp")
        elif layer == "plan" and included.startswith("train/"):
            counts["include lines plan/ -> train/"] += 1
            violations.append(f"{where}: plan/ must not include train/ (move what both need to theory/)")
        elif path.as_posix().endswith("cli/plan_command.cpp") and included.startswith("train/"):
            counts["include lines cli/plan_command.cpp -> train/"] += 1
            violations.append(f"{where}: the plan command must not include the engine (train/); what it needs is theory/'s")
        elif layer == "kernels" and not KERNELS_ALLOWED.match(included):
            counts["include lines kernels/ -> outside core/ and kernels/"] += 1
            violations.append(f"{where}: kernels/ includes only core/ and kernels/ (device/ includes kernels/: "
                              "move what the kernels need down to kernels/ or core/)")
        elif layer == "train" and included.startswith("plan/"):
            counts["include lines train/ -> plan/"] += 1
            violations.append(f"{where}: train/ must not include plan/ (move what both need to theory/)")
    return counts, violations


def flag_declarations(src):
    """(file under src/, flag, line number) for every long flag declared under src/cli."""
    for path in sorted((src / "cli").glob("*.cpp")):
        text = path.read_text(errors="replace")
        for match in DECLARATION.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            for name in match.group(1).split(","):
                if name.startswith("--"):
                    yield path.relative_to(src).as_posix(), name, number


def check_flags(src):
    """Returns (counts, violations) for the flags declared under src/cli."""
    declared = list(flag_declarations(src))
    layout = [(name, number) for path, name, number in declared if path == LAYOUT_FLAGS]
    names = {name for name, _ in layout}
    counts = {"layout flags declared in " + LAYOUT_FLAGS: len(names), "layout flags declared more than once": 0,
              "flags both layout commands declare outside " + LAYOUT_FLAGS: 0}
    violations = []
    seen = set()
    for name, number in layout:
        if name in seen:
            counts["layout flags declared more than once"] += 1
            violations.append(f"src/{LAYOUT_FLAGS}:{number}: {name} declared again (declare each layout flag once)")
        seen.add(name)
    for path, name, number in declared:
        if path != LAYOUT_FLAGS and name in names:
            counts["layout flags declared more than once"] += 1
            violations.append(f"src/{path}:{number}: {name} is a layout flag: use {LAYOUT_FLAGS}'s declaration")
    by_command = [{name for path, name, _ in declared if path == command} for command in LAYOUT_COMMANDS]
    for name in sorted(set.intersection(*by_command) - set(OWN_IN_EACH)):
        counts["flags both layout commands declare outside " + LAYOUT_FLAGS] += 1
        violations.append(f"{name} is declared by both {' and '.join(LAYOUT_COMMANDS)}: declare it once in "
                          f"{LAYOUT_FLAGS} for both")
    return counts, violations


def report(counts, violations):
    for name, count in counts.items():
        print(f"{name}: {count}")
    if "include lines plan/ -> train/" in counts:
        between = counts["include lines plan/ -> train/"] + counts["include lines train/ -> plan/"]
        print(f"include lines between plan/ and train/: {between}")
    for violation in violations:
        print(f"layering: {violation}")


def self_test():
    """Each planted include must be flagged alone; the clean tree must pass."""
    clean = {
        "theory/a.hpp": '#include "core/error.hpp"\n#include "theory/b.hpp"\n#include "kernels/gqa_math.hpp"\n',
        "plan/p.cpp": '#include "theory/a.hpp"\n#include "core/error.hpp"\n',
        "train/t.cpp": '#include "theory/a.hpp"\n#include "comm/communicator.hpp"\n',
        "cli/plan_command.cpp": '#include "plan/p.hpp"\n#include "theory/a.hpp"\n',
        "cli/train_command.cpp": '#include "train/t.hpp"\n',
        "device/d.cpp": '#include "kernels/validation_kernels.hpp"\n',
        "../kernels/k.cu": '#include "core/nvtx.hpp"\n#include "kernels/cuda_check.hpp"\n#include "host_device.hpp"\n',
    }
    planted = [
        ("theory/x.hpp", '#include "train/model.hpp"\n'),
        ("theory/x.cpp", '#include "plan/cluster.hpp"\n'),
        ("theory/x.hpp", '#include "comm/communicator.hpp"\n'),
        ("theory/sub/x.hpp", '#include "device/device.hpp"\n'),
        ("theory/x.cpp", '#include "bench/statistics.hpp"\n'),
        ("theory/x.cpp", '#include "collectives/ring.hpp"\n'),
        ("theory/x.cpp", '#include "report/json_file.hpp"\n'),
        ("theory/x.cpp", '#  include "cli/commands.hpp"\n'),
        ("theory/x.cpp", '#include "kernels/ops_launchers.hpp"\n'),
        ("plan/y.hpp", '#include "train/model.hpp"\n'),
        ("train/deep/z.cpp", '#include "plan/memory.hpp"\n'),
        ("cli/plan_command.cpp", '#include "train/model.hpp"\n'),
        ("../kernels/k.cu", '#include "device/cuda_check.hpp"\n'),
        ("../kernels/k_math.hpp", '#include "theory/model_config.hpp"\n'),
    ]

    failures = planted_failures(check, clean, planted) + planted_failures(check_flags, CLEAN_FLAGS, PLANTED_FLAGS)
    print(f"self-test: {len(planted)} planted bad includes and {len(PLANTED_FLAGS)} planted flag declarations flagged"
          if failures == 0 else f"self-test: {failures} failures")
    return failures == 0


def tree(root, files):
    """Writes `files` (path under src/ -> text) below root; returns root/src."""
    for name, text in files.items():
        path = root / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "src"


def planted_failures(checker, clean, planted):
    """`checker` must pass the clean tree and flag each planted line (appended to its file) alone,
    once; returns how many times it did not."""
    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        _, violations = checker(tree(pathlib.Path(folder) / "clean", clean))
        if violations:
            print(f"self-test: the clean tree was flagged: {violations}")
            failures += 1
        for index, (name, text) in enumerate(planted):
            files = dict(clean)
            files[name] = files.get(name, "") + text
            _, violations = checker(tree(pathlib.Path(folder) / f"planted{index}", files))
            if len(violations) != 1:
                print(f"self-test: planted {name}: {text.strip()} gave {len(violations)} violations, want 1")
                failures += 1
    return failures


CLEAN_FLAGS = {
    "cli/layout_flags.cpp": 'c.add_option("--tp", f.tp, "Tensor-parallel degree");\n'
                            'c.add_flag(\n    "--sp", f.sp, "Sequence parallelism");\n',
    "cli/train_command.cpp": 'sub->add_option("--steps", o.steps, "Timed steps");\n'
                             'sub->add_flag("-c,--check", o.check, "Compare");\nsub->add_option("--json", o.json, "");\n',
    "cli/plan_command.cpp": 'sub->add_option("--gpus", c.gpus, "GPUs");\nsub->add_option("--json", c.json, "");\n',
    "cli/collective_command.cpp": 'sub->add_flag("-c,--check", o.check, "Validate");\n',
}
# Each planted alone into the clean tree (appended to its file) must give one violation.
PLANTED_FLAGS = [
    ("cli/plan_command.cpp", 'sub->add_option("--tp", c.tp, "Tensor-parallel degree");\n'),
    ("cli/collective_command.cpp", 'sub->add_flag(\n        "-s,--sp", o.sp, "x");\n'),
    ("cli/layout_flags.cpp", 'c.add_option("--tp", f.tp, "again");\n'),
    ("cli/train_command.cpp", 'sub->add_option("--gpus", o.gpus, "GPUs");\n'),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", nargs="?", type=pathlib.Path, help="the src/ folder to check")
    parser.add_argument("--self-test", action="store_true", help="check that planted bad includes are flagged")
    args = parser.parse_args()
    if args.self_test:
        return 0 if self_test() else 1
    if args.src is None or not args.src.is_dir():
        print("check_layering: give the src/ folder to check (e.g. tests/layering/check_layering.py src)")
        return 2
    counts, violations = check(args.src)
    flag_counts, flag_violations = check_flags(args.src)
    report({**counts, **flag_counts}, violations + flag_violations)
    return 1 if violations or flag_violations else 0


if __name__ == "__main__":
    sys.exit(main())
