#!/usr/bin/env python3
"""The layering of src/ (docs/architecture.md): theory/ sits below plan/ and train/.

Rules, checked on every `#include "..."` line of every source file under src/:
  - src/theory includes only core/, theory/ and kernels/*_math.hpp (no MPI, no device,
    no engine, no planner, no output);
  - src/plan includes nothing from train/;
  - src/train includes nothing from plan/.

Prints the counts it found and every line that breaks a rule; exit status 1 when any does.
--self-test plants bad includes in a temporary tree and fails unless each one is flagged (and a
clean tree passes), so this check can fail."""
import argparse
import pathlib
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".cu", ".cuh"}
# What src/theory may include: the base layer, itself, and the kernels' host-side math headers.
THEORY_ALLOWED = re.compile(r"^(core/|theory/|kernels/[A-Za-z0-9_]+_math\.hpp$)")


def include_lines(src):
    """(layer, file, line number, included path) for every quoted include under src/."""
    for path in sorted(src.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        layer = path.relative_to(src).parts[0]
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if match:
                yield layer, path.relative_to(src.parent), number, match.group(1)


def check(src):
    """Returns (counts, violations) for the tree rooted at `src`."""
    counts = {"theory include lines": 0, "theory include lines outside core/, theory/, kernels/*_math.hpp": 0,
              "include lines plan/ -> train/": 0, "include lines train/ -> plan/": 0}
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
        elif layer == "train" and included.startswith("plan/"):
            counts["include lines train/ -> plan/"] += 1
            violations.append(f"{where}: train/ must not include plan/ (move what both need to theory/)")
    return counts, violations


def report(counts, violations):
    for name, count in counts.items():
        print(f"{name}: {count}")
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
    ]

    def tree(root, files):
        for name, text in files.items():
            path = root / "src" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return root / "src"

    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        counts, violations = check(tree(pathlib.Path(folder) / "clean", clean))
        if violations:
            print(f"self-test: the clean tree was flagged: {violations}")
            failures += 1
        for index, (name, text) in enumerate(planted):
            files = dict(clean)
            files[name] = text
            counts, violations = check(tree(pathlib.Path(folder) / f"planted{index}", files))
            if len(violations) != 1:
                print(f"self-test: planted {name}: {text.strip()} gave {len(violations)} violations, want 1")
                failures += 1
    print(f"self-test: {len(planted)} planted bad includes, {len(planted) - failures} flagged"
          if failures == 0 else f"self-test: {failures} failures")
    return failures == 0


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
    report(counts, violations)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
