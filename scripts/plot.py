#!/usr/bin/env python3
"""Plots parbench reports (JSON, schema parbench.report/v1).

    scripts/plot.py REPORT.json [MORE.json ...] [--kind KIND ...] [--out DIR] [--format png|svg]

Kinds (default: every kind the reports have data for):
  busbw     bus bandwidth against size, one panel per collective, one line per report
            (two clusters' reports overlay), log-log axes
  latency   time against size for small messages (up to --latency-max bytes)
  spread    every rank's median and mean time at one point (--point COLLECTIVE:BYTES,
            default each report's largest size of its first collective), the straggler marked
  ledger    train reports: the memory ledger per category, measured beside each theory
  bubble    train reports with --pp: the pipeline bubble per stage, measured beside the formula

Each kind is written to DIR/KIND.png (or .svg). Needs matplotlib: when the python3 that runs
this script lacks it, the script runs again under one that has it, or in a plotting
environment it makes from PyPI once (scripts/plot_env.py says how).
"""
import argparse
import json
import os
import sys

import plot_env  # scripts/plot_env.py: matplotlib, whatever python3 runs this

KINDS = ("busbw", "latency", "spread", "ledger", "bubble")


def load(paths):
    reports = []
    for path in paths:
        try:
            report = json.load(open(path))
        except (OSError, ValueError) as error:
            sys.exit(f"error: cannot read report {path}: {error}")
        if report.get("schema") != "parbench.report/v1":
            sys.exit(f"error: {path} is not a parbench report (schema parbench.report/v1)")
        report["_label"] = os.path.splitext(os.path.basename(path))[0]
        reports.append(report)
    return reports


def collective_points(report, placement):
    """{collective: [(bytes, entry), ...]} of the measured points at this placement."""
    points = {}
    for entry in report["results"]:
        if "collective" not in entry or "skipped" in entry:
            continue
        if entry.get("placement", "in" if entry.get("inplace") else "out") != placement:
            continue
        points.setdefault(entry["collective"], []).append((entry["bytes"], entry))
    for series in points.values():
        series.sort(key=lambda point: point[0])
    return points


def train_results(report):
    return [entry for entry in report["results"] if "memory_bytes" in entry]


def size_label(value, _position=None):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def panel_grid(pyplot, count, title):
    columns = min(3, count)
    rows = (count + columns - 1) // columns
    figure, axes = pyplot.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows), squeeze=False)
    figure.suptitle(title)
    for extra in axes.flat[count:]:
        extra.set_visible(False)
    return figure, list(axes.flat[:count])


def plot_size_series(pyplot, reports, args, value, ylabel, title, small_only):
    names = []
    for report in reports:
        for name in collective_points(report, args.placement):
            if name not in names:
                names.append(name)
    if not names:
        return None
    from matplotlib.ticker import FuncFormatter
    figure, axes = panel_grid(pyplot, len(names), title)
    for axis, name in zip(axes, names):
        for report in reports:
            series = [(b, e) for b, e in collective_points(report, args.placement).get(name, [])
                      if not small_only or b <= args.latency_max]
            if series:
                axis.plot([b for b, _ in series], [value(e) for _, e in series], marker="o", label=report["_label"])
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.xaxis.set_major_formatter(FuncFormatter(size_label))
        axis.set_title(name)
        axis.set_xlabel("size (B)")
        axis.set_ylabel(ylabel)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize="small")
    figure.tight_layout()
    return figure


def plot_busbw(pyplot, reports, args):
    return plot_size_series(pyplot, reports, args, lambda e: max(e["busbw_gbps"], 1e-6), "busbw (GB/s)",
                            f"bus bandwidth ({args.placement}-of-place)" if args.placement == "out"
                            else "bus bandwidth (in place)", False)


def plot_latency(pyplot, reports, args):
    def time(entry):
        return entry.get("reported_time_us", entry["time_us"]["median"])
    return plot_size_series(pyplot, reports, args, time, "time (us)",
                            f"latency up to {size_label(args.latency_max)}B ({args.placement} of place)", True)


def chosen_point(report, args):
    points = collective_points(report, args.placement)
    if not points:
        return None
    if args.point:
        name, _, size = args.point.partition(":")
        for bytes_, entry in points.get(name, []):
            if str(bytes_) == size:
                return entry
        return None
    first = next(iter(points.values()))
    return first[-1][1]


def plot_spread(pyplot, reports, args):
    chosen = [(report, chosen_point(report, args)) for report in reports]
    chosen = [(r, e) for r, e in chosen if e is not None and e.get("per_rank")]
    if not chosen:
        return None
    figure, axes = panel_grid(pyplot, len(chosen), "per-rank time of one point")
    for axis, (report, entry) in zip(axes, chosen):
        ranks = [r["rank"] for r in entry["per_rank"]]
        axis.bar(ranks, [r["median_us"] for r in entry["per_rank"]], color="tab:blue", alpha=0.7, label="median")
        axis.plot(ranks, [r["mean_us"] for r in entry["per_rank"]], "o", color="tab:orange", label="mean")
        axis.axhline(entry["reported_time_us"], color="black", linestyle="--",
                     label=f"reported ({entry['aggregation']})")
        straggler = entry.get("straggler")
        if straggler and straggler.get("consistent"):
            axis.annotate(f"waited for ({straggler['wait_us']:.0f} us)", (straggler["rank"], 0),
                          xytext=(0, 12), textcoords="offset points", ha="center", color="tab:red")
        axis.set_xticks(ranks)
        axis.set_xlabel("rank")
        axis.set_ylabel("own time (us)")
        axis.set_title(f"{report['_label']}: {entry['collective']} {size_label(entry['bytes'])}B")
        axis.legend(fontsize="small")
    figure.tight_layout()
    return figure


def theories(entry):
    """{theory name: {category: bytes}} of every theory column the report has."""
    found = {}
    for key, value in entry.items():
        if key.startswith("memory_theor") and isinstance(value, dict):
            found[key] = {k: v for k, v in value.items() if isinstance(v, (int, float)) and not k.startswith("total")}
    return found


def plot_ledger(pyplot, reports, args):
    panels = [(report, entry) for report in reports for entry in train_results(report)]
    if not panels:
        return None
    figure, axes = panel_grid(pyplot, len(panels), "memory ledger per rank: measured and theory")
    for axis, (report, entry) in zip(axes, panels):
        measured = {k: v for k, v in entry["memory_bytes"].items() if isinstance(v, (int, float))
                    and not k.startswith("total")}
        columns = {"measured": measured, **theories(entry)}
        categories = list(measured)
        for column in columns.values():
            categories += [c for c in column if c not in categories]
        width = 0.8 / len(columns)
        for index, (name, column) in enumerate(columns.items()):
            positions = [c + index * width for c in range(len(categories))]
            axis.bar(positions, [column.get(c, 0) / (1 << 20) for c in categories], width,
                     label=name.replace("memory_", "").replace("_bytes", ""))
        axis.set_xticks([c + 0.4 - width / 2 for c in range(len(categories))])
        axis.set_xticklabels(categories, rotation=20)
        axis.set_ylabel("MiB")
        layout = entry.get("layout", {})
        axis.set_title(f"{report['_label']}: " + " ".join(f"{k}{v}" for k, v in layout.items()
                                                         if isinstance(v, int)))
        axis.legend(fontsize="small")
    figure.tight_layout()
    return figure


def plot_bubble(pyplot, reports, args):
    panels = [(report, entry) for report in reports for entry in train_results(report)
              if isinstance(entry.get("bubble"), dict) and entry["bubble"].get("measured_per_stage")]
    if not panels:
        return None
    figure, axes = panel_grid(pyplot, len(panels), "pipeline bubble per stage: measured and formula")
    for axis, (report, entry) in zip(axes, panels):
        bubble = entry["bubble"]
        stages = list(range(len(bubble["measured_per_stage"])))
        axis.bar(stages, bubble["measured_per_stage"], color="tab:blue", alpha=0.7, label="measured")
        axis.axhline(bubble["theoretical"], color="black", linestyle="--", label=f"formula {bubble.get('formula', '')}")
        axis.set_xticks(stages)
        axis.set_xlabel("stage")
        axis.set_ylabel("bubble (idle / step)")
        axis.set_ylim(0, 1)
        pipeline = entry.get("pipeline", {})
        axis.set_title(f"{report['_label']}: {pipeline.get('schedule', '')} p={len(stages)} "
                       f"m={pipeline.get('microbatches', '')}")
        axis.legend(fontsize="small")
    figure.tight_layout()
    return figure


PLOTTERS = {"busbw": plot_busbw, "latency": plot_latency, "spread": plot_spread, "ledger": plot_ledger,
            "bubble": plot_bubble}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--kind", action="append", choices=KINDS, help="one kind; repeat for several (default: all)")
    parser.add_argument("--out", default=".", help="folder for the images (default: here)")
    parser.add_argument("--format", choices=("png", "svg"), default="png")
    parser.add_argument("--placement", choices=("out", "in"), default="out", help="which half of collective rows")
    parser.add_argument("--latency-max", type=int, default=64 * 1024, help="largest size of the latency plot (B)")
    parser.add_argument("--point", help="COLLECTIVE:BYTES for the spread plot")
    args = parser.parse_args()
    reports = load(args.reports)
    pyplot = plot_env.pyplot()
    os.makedirs(args.out, exist_ok=True)
    asked = args.kind or list(KINDS)
    written = 0
    for kind in asked:
        figure = PLOTTERS[kind](pyplot, reports, args)
        if figure is None:
            message = f"{kind}: nothing to plot in these reports"
            if args.kind:
                sys.exit(f"error: {message}")
            print(f"note: {message}", file=sys.stderr)
            continue
        path = os.path.join(args.out, f"{kind}.{args.format}")
        figure.savefig(path, dpi=110)
        pyplot.close(figure)
        print(path)
        written += 1
    if written == 0:
        sys.exit("error: nothing to plot: give collective or train reports")


if __name__ == "__main__":
    main()
