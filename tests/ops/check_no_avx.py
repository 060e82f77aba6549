#!/usr/bin/env python3
"""The baseline build of the CPU ops (CMake's parbench_cpu_ops_baseline) holds no instruction an
x86-64 CPU without AVX lacks: no VEX or EVEX encoding (AVX, AVX2, FMA, AVX-512: mnemonics from
'v', or ymm/zmm/k registers). The dispatching build's ops objects must hold AVX-512 and AVX2
bodies (zmm and ymm registers), which shows the scan finds them where they are.

  check_no_avx.py --baseline 'a.o;b.o' --dispatching 'core objects;...'
"""
import argparse
import re
import subprocess
import sys

# An instruction line of objdump -d: "  addr:\t<mnemonic> operands".
INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\s+(\S+)\s*(.*)$")
WIDE_REGISTER = re.compile(r"%(ymm|zmm|k[0-7]\b)")
# VEX-only mnemonics start with 'v' (vmovaps, vfmadd231ps, vzeroupper, vpbroadcastd...); the
# legacy ones that do too are not vector instructions.
LEGACY_V = {"verr", "verw"}


def avx_lines(objects):
    found = []
    for path in objects:
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], check=True, capture_output=True,
                                 text=True).stdout
        for line in listing.splitlines():
            match = INSTRUCTION.match(line)
            if not match:
                continue
            mnemonic, operands = match.groups()
            if (mnemonic.startswith("v") and mnemonic not in LEGACY_V) or WIDE_REGISTER.search(operands):
                found.append(f"{path}: {line.strip()}")
    return found


def ops_objects(listing):
    return [path for path in listing.split(";") if "/train/ops/" in path and path.endswith(".o")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", required=True, help="the baseline build's objects, ';'-separated")
    parser.add_argument("--dispatching", required=True, help="the core's objects, ';'-separated")
    args = parser.parse_args()
    baseline, dispatching = ops_objects(args.baseline), ops_objects(args.dispatching)
    if not baseline or not dispatching:
        sys.exit(f"no train/ops objects given (baseline {len(baseline)}, dispatching {len(dispatching)})")
    failures = []
    wide = avx_lines(baseline)
    if wide:
        failures.append(f"{len(wide)} AVX instructions in the baseline build, the first: {wide[0]}")
    dispatched = "\n".join(avx_lines(dispatching))
    for register, path in (("%zmm", "avx512"), ("%ymm", "avx2")):
        if register not in dispatched:
            failures.append(f"no {register} in the dispatching build's ops: its {path} bodies are missing "
                            "(or the scan no longer sees them)")
    for failure in failures:
        print("FAILED:", failure)
    print(f"{len(baseline)} baseline objects without AVX; {len(dispatching)} dispatching objects with "
          f"{dispatched.count('%zmm')} zmm and {dispatched.count('%ymm')} ymm operands")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
