#!/usr/bin/env python3
"""Every source path a document names exists, so a page that says where things live cannot rot
silently when a file moves (docs/architecture.md is checked by CTest).

A path is a Markdown link target or an inline-code word that starts with one of the project's
folders (src/, kernels/, tests/, scripts/, configs/, schemas/, docs/, results/) or a word of the
form FOLDER/FILE.EXT after a path already named (`communicator.cpp` beside
`src/comm/communicator.hpp` is taken as src/comm/communicator.cpp). A glob (`kernels/*_math.hpp`)
must match at least one file; a placeholder in capitals (`src/collectives/NAME.cpp`) is not a path.

Usage: check_doc_paths.py DOC.md [--min N]    (fails when fewer than N paths were found)
       check_doc_paths.py --self-test        (a document with a missing path must fail)"""
import argparse
import glob
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDERS = ("src/", "kernels/", "tests/", "scripts/", "configs/", "schemas/", "docs/", "results/")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
CODE = re.compile(r"`([^`\s]+)`")
PLACEHOLDER = re.compile(r"(^|/)[A-Z][A-Z_]*(\.[a-z]+)?$")


def named_paths(text, document_dir, root):
    """(line number, path relative to the root) for every path the document names."""
    found = []
    last_dir = None
    for number, line in enumerate(text.splitlines(), 1):
        matches = sorted([(m.start(), "link", m.group(1)) for m in LINK.finditer(line)] +
                         [(m.start(), "code", m.group(1)) for m in CODE.finditer(line)])
        for _, kind, word in matches:
            if kind == "link":
                if "://" in word:
                    continue
                path = os.path.relpath(os.path.normpath(os.path.join(document_dir, word)), root)
            else:
                word = word.rstrip(".,;:")
                if last_dir and re.fullmatch(r"[a-z0-9_]+\.(cpp|hpp|cu|py|sh|json)", word):
                    found.append((number, f"{last_dir}/{word}"))
                    continue
                if not word.startswith(FOLDERS) or PLACEHOLDER.search(word) or "<" in word:
                    continue
                path = word.rstrip("/")
            found.append((number, path))
            # A file's folder is where a bare sibling name after it lives.
            last_dir = os.path.dirname(path) if "." in os.path.basename(path) else path
    return found


def missing(document, root):
    text = open(document).read()
    paths = named_paths(text, os.path.dirname(os.path.abspath(document)), root)
    gone = [(n, p) for n, p in paths if not glob.glob(os.path.join(root, p))]
    return paths, gone


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "src", "comm"))
        os.makedirs(os.path.join(root, "docs"))
        open(os.path.join(root, "src", "comm", "communicator.hpp"), "w").close()
        good = "See [the interface](../src/comm/communicator.hpp) and `src/collectives/NAME.cpp`.\n"
        cases = {"good": (good, 0),
                 "missing link": (good + "[gone](../src/comm/gone.hpp)\n", 1),
                 "missing code path": (good + "`src/comm/mpi.cpp`\n", 1),
                 "missing sibling": (good + "`src/comm/communicator.hpp` and `communicator.cpp`\n", 1)}
        failures = 0
        for name, (text, want) in cases.items():
            document = os.path.join(root, "docs", "page.md")
            open(document, "w").write(text)
            _, gone = missing(document, root)
            if len(gone) != want:
                print(f"self-test {name}: {len(gone)} missing paths found, want {want}: {gone}")
                failures += 1
    print(f"self-test: {len(cases) - failures} of {len(cases)} cases right")
    return failures == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("document", nargs="?")
    parser.add_argument("--min", type=int, default=1, help="fail when fewer paths than this are found")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return 0 if self_test() else 1
    if not args.document:
        parser.error("give a document, or --self-test")
    paths, gone = missing(args.document, ROOT)
    for number, path in gone:
        print(f"{os.path.basename(args.document)}:{number}: {path} does not exist; update the page")
    print(f"{len(paths)} paths named, {len(gone)} missing")
    if len(paths) < args.min:
        print(f"fewer than {args.min} paths found: the page or this check's parsing changed")
        return 1
    return 1 if gone else 0


if __name__ == "__main__":
    sys.exit(main())
