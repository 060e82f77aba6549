#!/usr/bin/env python3
"""A CPU run loads no CUDA library (src/device/cuda_plugin.hpp): `parbench --version`, a
1-rank allreduce and a 1-rank training step, run as a user would, under the dynamic loader's
own log (LD_DEBUG=libs, one file per process), must not load the CUDA runtime, cuBLAS, NCCL
or the CUDA plugin. Where no NVIDIA driver is loaded (no /proc/driver/nvidia/gpus entry, no
/dev/nvidiactl), the default backend (auto) must not load them to learn there is no GPU.
The log of each run must show libmpi (or, for --version, libc) loaded: the log was read.

In a build with CUDA, `parbench info` must load the plugin (it asks the CUDA runtime for the
GPUs) and report the runtime's version: the plugin resolves every symbol (RTLD_NOW).

    cuda_libraries_e2e.py --parbench BIN --mpiexec "mpirun ..." --built-with-cuda ON|OFF
"""
import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

CUDA_LIBRARIES = re.compile(r"lib(cudart|cublas|cublasLt|nccl|cuda|parbench_cuda)\.so")


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def driver_present():
    return bool(glob.glob("/proc/driver/nvidia/gpus/*")) or os.path.exists("/dev/nvidiactl")


def loaded_libraries(command, workdir, name):
    """Runs `command` with the loader's log on; returns (exit status, output, {pid: libraries})
    for the processes that ran the parbench binary."""
    prefix = os.path.join(workdir, name)
    env = dict(os.environ, LD_DEBUG="libs", LD_DEBUG_OUTPUT=prefix, OPENBLAS_NUM_THREADS="1")
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    by_process = {}
    for path in glob.glob(prefix + ".*"):
        text = open(path, errors="replace").read()
        # "initialize program: BIN" names the process's program; "calling init: LIB" every
        # library it initialised, dlopen()ed ones included.
        programs = re.findall(r"initialize program: (\S+)", text)
        if not any(os.path.basename(program) == "parbench" for program in programs):
            continue
        by_process[path] = set(re.findall(r"calling init: (\S+)", text))
    return run.returncode, run.stdout + run.stderr, by_process


def check_cpu_run(label, command, workdir, must_load):
    status, output, by_process = loaded_libraries(command, workdir, label)
    if status != 0:
        fail(f"{label}: exit {status}: {' '.join(command)}\n{output}")
    if not by_process:
        fail(f"{label}: the loader's log names no parbench process (LD_DEBUG unsupported?)\n{output}")
    for path, libraries in by_process.items():
        if not any(must_load in library for library in libraries):
            fail(f"{label}: the loader's log {path} does not show {must_load}: the log is not what this test reads")
        cuda = sorted(library for library in libraries if CUDA_LIBRARIES.search(library))
        if cuda:
            fail(f"{label}: a CPU run loaded CUDA libraries: {cuda}")
    print(f"{label}: {len(by_process)} parbench process(es), none loaded a CUDA library")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--built-with-cuda", default="OFF")
    args = parser.parse_args()
    built_with_cuda = args.built_with_cuda.upper() in ("ON", "TRUE", "1")
    mpiexec = shlex.split(args.mpiexec)
    with tempfile.TemporaryDirectory() as workdir:
        check_cpu_run("version", [args.parbench, "--version"], workdir, "libc.so")
        check_cpu_run("allreduce with --backend mpi",
                      mpiexec + ["-np", "1", args.parbench, "allreduce", "--size", "64K", "--iters", "3",
                                 "--warmup", "1", "--backend", "mpi"], workdir, "libmpi")
        check_cpu_run("train with --backend mpi",
                      mpiexec + ["-np", "1", args.parbench, "train", "--model", "gpt-tiny", "--steps", "1",
                                 "--warmup", "0", "--backend", "mpi"], workdir, "libmpi")
        if not driver_present():
            check_cpu_run("allreduce with the default backend, no NVIDIA driver",
                          mpiexec + ["-np", "1", args.parbench, "allreduce", "--size", "64K", "--iters", "3",
                                     "--warmup", "1"], workdir, "libmpi")
        else:
            print("an NVIDIA driver is loaded here: the default backend may load CUDA to count the GPUs; not checked")
        if built_with_cuda:
            report = os.path.join(workdir, "info.json")
            status, output, by_process = loaded_libraries(
                mpiexec + ["-np", "1", args.parbench, "info", "--json", report], workdir, "info")
            if status != 0:
                fail(f"info: exit {status}\n{output}")
            libraries = set().union(*by_process.values()) if by_process else set()
            if not any("libparbench_cuda.so" in library for library in libraries):
                fail(f"info: a CUDA build's info did not load the plugin: {sorted(libraries)}\n{output}")
            hosts = json.load(open(report)).get("hosts", []) if os.path.exists(report) else []
            gpu = hosts[0].get("gpu", {}) if hosts else {}
            if not gpu.get("built_with_cuda") or not gpu.get("cuda_runtime"):
                fail(f"info: the plugin loaded but the report lacks the CUDA runtime: {gpu}\n{output}")
            print(f"info: the plugin loaded; CUDA runtime {gpu['cuda_runtime']}, NCCL {gpu.get('nccl')}")


if __name__ == "__main__":
    main()
