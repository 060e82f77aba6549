"""matplotlib for the plotting scripts, whatever `python3` runs them (Debian's, pyenv, conda, a
virtual environment): scripts/setup.sh installs Debian's python3-matplotlib, which only
/usr/bin/python3 can import.

pyplot() returns matplotlib.pyplot (Agg backend) when this interpreter has it. Otherwise it
runs the script again, same arguments, under the first interpreter that has it: the project's
plotting environment (.venv-plot at the checkout's root, or $PARBENCH_PLOT_VENV), then Debian's
/usr/bin/python3. When neither has it, it makes that environment (python3 -m venv, then pip
install matplotlib from PyPI, once; later runs reuse it) and runs the script there. Each step
says so on stderr; a failure is one line naming the fix.
"""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RERUN = "PARBENCH_PLOT_RERUN"  # set in the second run, so that it never loops


def environment_folder():
    return os.environ.get("PARBENCH_PLOT_VENV") or os.path.join(ROOT, ".venv-plot")


def has_matplotlib(python):
    if not (python and os.access(python, os.X_OK)):
        return False
    probe = subprocess.run([python, "-c", "import matplotlib"], capture_output=True)
    return probe.returncode == 0


def say(text):
    print(f"{os.path.basename(sys.argv[0])}: {text}", file=sys.stderr, flush=True)


def rerun_under(python):
    script = os.path.abspath(sys.argv[0])
    os.execve(python, [python, script, *sys.argv[1:]], dict(os.environ, **{RERUN: "1"}))


def make_environment(folder):
    """Makes the plotting environment from PyPI; returns its python, or the reason it failed."""
    staging = f"{folder}.partial-{os.getpid()}"
    failures = []
    for creator in dict.fromkeys([sys.executable, shutil.which("python3"), "/usr/bin/python3"]):
        if not (creator and os.access(creator, os.X_OK)):
            continue
        shutil.rmtree(staging, ignore_errors=True)
        made = subprocess.run([creator, "-m", "venv", staging], capture_output=True, text=True)
        if made.returncode != 0:
            failures.append(f"{creator} -m venv: {(made.stderr.strip().splitlines() or ['failed'])[-1]}")
            continue
        python = os.path.join(staging, "bin", "python")
        installed = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                    "matplotlib"], capture_output=True, text=True)
        if installed.returncode != 0 or not has_matplotlib(python):
            failures.append(f"pip install matplotlib: {(installed.stderr.strip().splitlines() or ['failed'])[-1]}")
            continue
        try:
            os.rename(staging, folder)  # whole or not at all: a run stopped half-way leaves no environment
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # a concurrent run made it first
        return os.path.join(folder, "bin", "python"), None
    shutil.rmtree(staging, ignore_errors=True)
    return None, "; ".join(failures) or "no python3 to make it with"


def pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot

        return matplotlib.pyplot
    except ImportError:
        pass
    fix = ("install matplotlib for this interpreter (python3 -m pip install matplotlib), or Debian's "
           "python3-matplotlib (apt-get install python3-matplotlib) and run the script with /usr/bin/python3")
    if os.environ.get(RERUN):
        sys.exit(f"error: matplotlib is not importable by {sys.executable} either; {fix}")
    folder = environment_folder()
    for python in (os.path.join(folder, "bin", "python"), "/usr/bin/python3"):
        # Paths as given, not resolved: a venv's bin/python3 links to the interpreter it was made
        # from, and yet imports from other folders.
        if os.path.abspath(python) != os.path.abspath(sys.executable) and has_matplotlib(python):
            say(f"matplotlib is not importable by {sys.executable}; running under {python}, which has it")
            rerun_under(python)
    say(f"matplotlib is not importable by {sys.executable}; installing it from PyPI into {folder} (once)")
    python, failure = make_environment(folder)
    if python is None:
        sys.exit(f"error: matplotlib is not importable by {sys.executable}, and {folder} could not be made "
                 f"({failure}); {fix}")
    rerun_under(python)
