#!/usr/bin/env python3
"""scripts/bench/bench_vs_torch.sh checks its arguments before it installs PyTorch (issue 32: it
downloaded PyTorch, then refused a typo): each bad argument is one line and exit 2 within
seconds, and the virtual environment it would install into is never made.

Usage: bench_vs_torch_arguments.py --parbench BIN
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench", "bench_vs_torch.sh")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parbench", required=True)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="parbench-torch-args-")
    venv = os.path.join(tmp, "venv")
    cases = [
        (["--pairs", "0"], "--pairs must be at least 1"),
        (["gpt-huge"], "unknown comparison 'gpt-huge'"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--json", os.path.join(tmp, "absent", "out.json")], "does not exist or is not writable"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ]
    failures = []
    try:
        for arguments, needle in cases:
            started = time.monotonic()
            result = subprocess.run([SCRIPT, "--parbench", args.parbench, *arguments], capture_output=True, text=True,
                                    timeout=60, env=dict(os.environ, PARBENCH_TORCH_VENV=venv),
                                    stdin=subprocess.DEVNULL)
            took = time.monotonic() - started
            if result.returncode != 2 or needle not in result.stderr or result.stdout or os.path.exists(venv):
                failures.append(f"{arguments}: exit {result.returncode}, stdout {result.stdout!r}, venv made: "
                                f"{os.path.exists(venv)}, stderr {result.stderr!r}")
            else:
                print(f"{' '.join(arguments)}: exit 2 in {took:.1f} s, nothing installed: "
                      f"{result.stderr.strip().splitlines()[-1]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
