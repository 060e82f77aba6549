#!/usr/bin/env python3
"""The plotting scripts run as docs/collectives.md and docs/pipeline.md show them (`scripts/plot/plot.py ...`,
found through its `#!/usr/bin/env python3`), with a python3 first on PATH that has no
matplotlib: a bare virtual environment, as pyenv, conda or a project venv would be. They must
run again under an interpreter that has it and draw, saying so on stderr.

Usage: check_fresh_python.py --parbench BIN --mpiexec MPIEXEC --model PIPELINE_MODEL
Exit 77 (CTest: skipped) when no interpreter here has matplotlib to fall back on.
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, timeout=240, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{result.stdout}\n{result.stderr}")
    return result


def check_png(path):
    with open(path, "rb") as image:
        if image.read(8) != b"\x89PNG\r\n\x1a\n" or os.path.getsize(path) < 5000:
            sys.exit(f"FAILED: {path} is not a drawn PNG")


def main():
    parser = argparse.ArgumentParser()
    for name in ("--parbench", "--mpiexec", "--model"):
        parser.add_argument(name, required=True)
    args = parser.parse_args()
    if subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], capture_output=True).returncode != 0:
        print("skipped: /usr/bin/python3 has no matplotlib to fall back on (scripts/setup.sh installs "
              "python3-matplotlib); the PyPI path needs a network")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="parbench-fresh-python-") as tmp:
        bare = os.path.join(tmp, "bare-venv")
        run(["/usr/bin/python3", "-m", "venv", "--without-pip", bare])
        path = os.path.join(bare, "bin") + os.pathsep + os.environ.get("PATH", "")
        # No plotting environment of the checkout's own: the test must not reuse or make one.
        env = dict(os.environ, PATH=path, OPENBLAS_NUM_THREADS="1",
                   PARBENCH_PLOT_VENV=os.path.join(tmp, "no-plot-venv"))
        env.pop("PARBENCH_PLOT_RERUN", None)
        python3 = subprocess.run(["python3", "-c", "import sys; print(sys.executable)"], capture_output=True,
                                 text=True, env=env).stdout.strip()
        if not python3.startswith(bare):
            sys.exit(f"FAILED: python3 on PATH is {python3}, not the bare environment")
        if subprocess.run(["python3", "-c", "import matplotlib"], capture_output=True, env=env).returncode == 0:
            sys.exit("FAILED: the bare environment imports matplotlib; the test proves nothing")

        mpiexec = args.mpiexec.split()
        report, train, trace = (os.path.join(tmp, name) for name in ("ar.json", "train.json", "trace.json"))
        run(mpiexec + ["-np", "2", args.parbench, "allreduce", "-b", "8", "-e", "64K", "-f", "32", "--iters", "3",
                       "--json", report], env=env)
        run(mpiexec + ["-np", "2", args.parbench, "train", "--model", args.model, "--pp", "2", "--microbatches", "2",
                       "--steps", "1", "--warmup", "0", "--json", train, "--trace", trace, "--quiet"], env=env)

        out = os.path.join(tmp, "plots")
        result = run([os.path.join(ROOT, "scripts", "plot", "plot.py"), report, "--out", out], cwd=tmp, env=env)
        if "running under /usr/bin/python3" not in result.stderr:
            sys.exit(f"FAILED: plot.py did not say which interpreter it ran under: {result.stderr}")
        check_png(os.path.join(out, "busbw.png"))
        timeline = os.path.join(tmp, "timeline.png")
        result = run([os.path.join(ROOT, "scripts", "plot", "plot_timeline.py"), trace, timeline], cwd=tmp, env=env)
        if "running under /usr/bin/python3" not in result.stderr:
            sys.exit(f"FAILED: plot_timeline.py did not say which interpreter it ran under: {result.stderr}")
        check_png(timeline)
        if os.path.exists(env["PARBENCH_PLOT_VENV"]):
            sys.exit("FAILED: an environment was made although /usr/bin/python3 has matplotlib")
    print("plot.py and plot_timeline.py drew under a python3 without matplotlib, through /usr/bin/python3")
    return 0


if __name__ == "__main__":
    sys.exit(main())
