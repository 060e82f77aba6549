#!/usr/bin/env python3
"""Every statement that writes to std::cerr writes one piece: `cerr << a << b` is one write per
piece on the unbuffered stream, and under mpirun another stream's output lands between them
(issue 22: scripts/run.sh printed `warning: of #`). Build the line, then write it whole
(core/console.hpp's write_line, or `std::cerr << (text + "\\n") << std::flush`).

Usage: one_write_per_line.py SRC_DIR
"""
import os
import re
import sys


def code_outside_literals(text, start=0):
    """(index, char, bracket depth) for each character from start outside string and char
    literals; both scanners below walk C++ the same way."""
    depth, quote, i = 0, None, start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        else:
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            yield i, c, depth
        i += 1


def statements_writing_cerr(text):
    """(line, statement) for each statement that starts with std::cerr, up to its ';'."""
    for match in re.finditer(r"std::cerr\s*<<", text):
        end = len(text)
        for i, c, depth in code_outside_literals(text, match.start()):
            if c == ";" and depth == 0:
                end = i
                break
        yield text.count("\n", 0, match.start()) + 1, text[match.start():end]


def pieces(statement):
    """The operands of the statement's top-level <<, manipulators that only flush left out."""
    parts, start, skip_next = [], 0, False
    for i, c, depth in code_outside_literals(statement):
        if skip_next:
            skip_next = False
            continue
        if depth == 0 and statement.startswith("<<", i):
            parts.append(statement[start:i].strip())
            start = i + 2
            skip_next = True
    parts.append(statement[start:].strip())
    operands = parts[1:]  # parts[0] is std::cerr
    # Adjacent string literals are one literal: "a" "b" is a single piece.
    return [p for p in operands if p not in ("std::flush", "std::endl")]


def main():
    root = sys.argv[1]
    failures = []
    checked = 0
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith((".cpp", ".hpp", ".cu")):
                continue
            path = os.path.join(folder, name)
            for line, statement in statements_writing_cerr(open(path, encoding="utf-8").read()):
                checked += 1
                if len(pieces(statement)) > 1:
                    failures.append(f"{os.path.relpath(path, root)}:{line}: {' '.join(statement.split())[:100]}")
    for failure in failures:
        print(f"written in pieces: {failure}")
    print(f"{checked} statements writing std::cerr checked, {len(failures)} written in pieces")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
