#!/usr/bin/env python3
"""Plots parbench reports (JSON, schema parbench.report/v1).

    scripts/plot/plot.py REPORT.json [MORE.json ...] [--kind KIND ...] [--out DIR] [--format png|svg]

Kinds (default: every kind the reports have data for):
  busbw     bus bandwidth against size, one panel per collective, one line per report
            (two clusters' reports overlay; one per type/op/root case under -d/-o/-r all),
            log-log axes; a band from the samples' 5th to 95th percentile around each line,
            or, for a report of several sweeps (--repeat, -N), the sweeps' median with a band
            from their smallest to largest
  latency   time against size for small messages (up to --latency-max bytes), with the band
  spread    every rank's median and mean time at one point (--point COLLECTIVE:BYTES,
            default each report's largest size of its first collective), the straggler marked,
            the samples' 5th-95th percentile shaded
  ledger    train reports: each rank's memory by category (stacked), measured beside the
            largest rank's theory (every buffer) and ZeRO's 16 B/param model states
  bubble    train reports with --pp: the pipeline bubble per stage, measured beside the formula

Each kind is written to DIR/KIND.png (or .svg), 1600 pixels wide, for a slide: panels with
their own titles under the figure's, one legend per figure. Needs matplotlib: when the python3
that runs this script lacks it, the script runs again under one that has it, or in a plotting
environment it makes from PyPI once (scripts/plot/plot_env.py says how).
"""
import argparse
import json
import os
import sys

import plot_env  # scripts/plot/plot_env.py: matplotlib, whatever python3 runs this

KINDS = ("busbw", "latency", "spread", "ledger", "bubble")
# A slide's width: 1600 pixels at this resolution; text sized to read at that width.
DPI = 160
WIDTH_INCHES = 1600 / DPI
STYLE = {"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 10,
         "figure.titlesize": 14, "xtick.labelsize": 10, "ytick.labelsize": 10}


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


def case_of(entry):
    """A point's (type, op, root) case: a report of -d/-o/-r all holds several per collective."""
    return tuple(str(entry[key]) for key in ("dtype", "op", "root") if entry.get(key) is not None)


def collective_points(report, placement):
    """{collective: {case: [(bytes, [entry, ...]), ...]}} of the measured points at this
    placement; a point's entries are its sweeps under --repeat (nccl-tests' -N), one without."""
    points = {}
    for entry in report["results"]:
        if "collective" not in entry or "skipped" in entry:
            continue
        if entry.get("placement", "in" if entry.get("inplace") else "out") != placement:
            continue
        by_size = points.setdefault(entry["collective"], {}).setdefault(case_of(entry), {})
        by_size.setdefault(entry["bytes"], []).append(entry)
    return {name: {case: sorted(by_size.items()) for case, by_size in cases.items()}
            for name, cases in points.items()}


def train_results(report):
    return [entry for entry in report["results"] if "memory_bytes" in entry]


def size_label(value, _position=None):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def panel_grid(pyplot, count, title, panel_height=3.2, most_columns=3):
    """A figure 1600 px wide of `count` panels and a row below them for the legend; constrained
    layout keeps the figure's title, the panels' titles and the legend from overlapping."""
    columns = min(most_columns, count)
    rows = (count + columns - 1) // columns
    legend_height = 0.5
    figure = pyplot.figure(figsize=(WIDTH_INCHES, panel_height * rows + legend_height + 0.6), layout="constrained")
    grid = figure.add_gridspec(rows + 1, columns, height_ratios=[panel_height] * rows + [legend_height])
    axes = [figure.add_subplot(grid[index // columns, index % columns]) for index in range(count)]
    figure.legend_axis = figure.add_subplot(grid[rows, :])  # figure_legend draws in it
    figure.legend_grid = (grid, [panel_height] * rows, legend_height)
    figure.legend_axis.axis("off")
    figure.suptitle(title)
    return figure, axes


def figure_legend(figure, axes):
    """One legend for the figure, below the panels, of every distinct label drawn."""
    handles, labels = [], []
    for axis in axes:
        for handle, label in zip(*axis.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    shading = getattr(figure, "band_kinds", None)
    if not handles:
        return
    # As many columns as the longest label lets fit in the width (about 120 characters of the
    # legend's font at 1600 px), and a taller legend row for more rows, so that no label is cut;
    # what the shading means on a row of its own below.
    columns = max(1, min(len(labels), 5, 120 // (max(len(label) for label in labels) + 6)))
    rows = -(-len(labels) // columns) + (1 if shading else 0)
    grid, panel_heights, legend_height = figure.legend_grid
    needed = 0.25 * rows + 0.25
    if needed > legend_height:
        grid.set_height_ratios(panel_heights + [needed])
        figure.set_figheight(figure.get_figheight() + needed - legend_height)
    axis = figure.legend_axis
    lines = axis.legend(handles, labels, loc="upper center" if shading else "center", ncol=columns, frameon=False)
    if shading:  # one entry for the bands of every line, in grey
        from matplotlib.patches import Patch
        axis.add_artist(lines)
        axis.legend([Patch(color="grey", alpha=0.3)], ["shaded: each point's " + " or ".join(shading)],
                    loc="lower center", frameon=False)


def percentile(values, fraction):
    """Linear interpolation between closest ranks (numpy's default), as parbench's statistics."""
    ordered = sorted(values)
    at = fraction * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def sample_band(entry):
    """(p5, p95) of a point's time samples (us), or None when it has fewer than 3."""
    samples = entry.get("samples_us") or []
    if len(samples) < 3:
        return None
    return percentile(samples, 0.05), percentile(samples, 0.95)


def median(values):
    return percentile(values, 0.5)


def plot_size_series(pyplot, reports, args, value, band, ylabel, title, small_only):
    """One panel per collective, a line per report (and per type/op/root case where a report has
    several). A point measured in several sweeps (--repeat, nccl-tests' -N) is drawn at the
    median of its sweeps with a band from their smallest to their largest value; a point of one
    sweep with samples, with a band between the values of its 5th and 95th percentile samples
    (`band(entry, (p5, p95))`)."""
    names = []
    for report in reports:
        for name in collective_points(report, args.placement):
            if name not in names:
                names.append(name)
    if not names:
        return None
    from matplotlib.ticker import FuncFormatter
    figure, axes = panel_grid(pyplot, len(names), title, most_columns=4 if len(names) > 6 else 3)
    figure.band_kinds = []
    cycle = pyplot.rcParams["axes.prop_cycle"].by_key()["color"]
    colours = {}  # a line's label -> its colour, the same in every panel
    for axis, name in zip(axes, names):
        for report in reports:
            cases = collective_points(report, args.placement).get(name, {})
            for case, points in cases.items():
                series = [(b, entries) for b, entries in points if not small_only or b <= args.latency_max]
                if not series:
                    continue
                label = report["_label"] + (" " + " ".join(case) if len(cases) > 1 else "")
                colour = colours.setdefault(label, cycle[len(colours) % len(cycle)])
                sizes = [b for b, _ in series]
                axis.plot(sizes, [median([value(e) for e in entries]) for _, entries in series], marker="o",
                          markersize=3, color=colour, label=label)
                if all(len(entries) > 1 for _, entries in series):
                    bands, kind = [(min(value(e) for e in entries), max(value(e) for e in entries))
                                   for _, entries in series], "sweeps, smallest to largest (--repeat)"
                else:
                    bands = [band(entries[0], sample_band(entries[0])) if sample_band(entries[0]) else None
                             for _, entries in series]
                    kind = "samples, 5th to 95th percentile"
                if all(bands):
                    axis.fill_between(sizes, [low for low, _ in bands], [high for _, high in bands], color=colour,
                                      alpha=0.2, linewidth=0)
                    if kind not in figure.band_kinds:
                        figure.band_kinds.append(kind)
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.xaxis.set_major_formatter(FuncFormatter(size_label))
        axis.set_title(name)
        axis.set_xlabel("size (B)")
        axis.set_ylabel(ylabel)
        axis.grid(True, which="both", alpha=0.3)
    figure_legend(figure, axes)
    return figure


def plot_busbw(pyplot, reports, args):
    def busbw(entry):
        return max(entry["busbw_gbps"], 1e-6)

    def band(entry, times):
        # A slower sample is a lower bandwidth: the band runs from p95's time to p5's.
        scale = entry["busbw_gbps"] * entry["reported_time_us"]
        return max(scale / times[1], 1e-6), max(scale / times[0], 1e-6)
    placement = "out of place" if args.placement == "out" else "in place"
    return plot_size_series(pyplot, reports, args, busbw, band, "busbw (GB/s)", f"bus bandwidth ({placement})", False)


def plot_latency(pyplot, reports, args):
    def time(entry):
        return entry.get("reported_time_us", entry["time_us"]["median"])
    return plot_size_series(pyplot, reports, args, time, lambda entry, times: times, "time (us)",
                            f"latency up to {size_label(args.latency_max)}B ({args.placement} of place)", True)


def chosen_point(report, args):
    points = collective_points(report, args.placement)
    if not points:
        return None
    # The first case's point, in its first sweep.
    if args.point:
        name, _, size = args.point.partition(":")
        for bytes_, entries in next(iter(points.get(name, {}).values()), []):
            if str(bytes_) == size:
                return entries[0]
        return None
    first = next(iter(next(iter(points.values())).values()))
    return first[-1][1][0]


def plot_spread(pyplot, reports, args):
    chosen = [(report, chosen_point(report, args)) for report in reports]
    chosen = [(r, e) for r, e in chosen if e is not None and e.get("per_rank")]
    if not chosen:
        return None
    figure, axes = panel_grid(pyplot, len(chosen), "per-rank time of one point", panel_height=3.6,
                              most_columns=2)
    for axis, (report, entry) in zip(axes, chosen):
        ranks = [r["rank"] for r in entry["per_rank"]]
        axis.bar(ranks, [r["median_us"] for r in entry["per_rank"]], color="tab:blue", alpha=0.7,
                 label="rank's median")
        axis.plot(ranks, [r["mean_us"] for r in entry["per_rank"]], "o", color="tab:orange", label="rank's mean")
        band = sample_band(entry)
        if band:
            axis.axhspan(band[0], band[1], color="grey", alpha=0.2, label="p5-p95 of the samples")
        axis.axhline(entry["reported_time_us"], color="black", linestyle="--", label="reported time")
        straggler = entry.get("straggler")
        if straggler and straggler.get("consistent"):
            axis.annotate(f"waited for ({straggler['wait_us']:.0f} us)", (straggler["rank"], 0),
                          xytext=(0, 12), textcoords="offset points", ha="center", color="tab:red")
        axis.set_xticks(ranks)
        axis.set_xlabel("rank")
        axis.set_ylabel("own time (us)")
        axis.set_title(f"{report['_label']}: {entry['collective']} {size_label(entry['bytes'])}B, "
                       f"{entry['aggregation']}")
    figure_legend(figure, axes)
    return figure


# The ledger's categories, bottom to top, and their colours; a report's "activations_peak" is
# the activations' peak, its theory's "activations" the same buffers.
CATEGORIES = (("params", "tab:blue"), ("grads", "tab:orange"), ("optimizer", "tab:green"),
              ("activations", "tab:red"))


def categories_of(figures):
    """{category: MiB} of a ledger's or a theory's bytes by category."""
    return {name: (figures.get(name) or figures.get(f"{name}_peak") or 0) / (1 << 20) for name, _ in CATEGORIES}


def layout_text(entry):
    layout = entry.get("layout", {})
    degrees = " x ".join(f"{name} {layout[name]}" for name in ("dp", "tp", "pp", "cp", "ep")
                         if isinstance(layout.get(name), int) and layout[name] > 1)
    scheme = layout.get("scheme", "")
    return f"{degrees or 'one rank'}{', ' + scheme if scheme else ''}"


def plot_ledger(pyplot, reports, args):
    """Each rank's measured memory, stacked by category, then the largest rank's theory (every
    buffer the engine allocates) and ZeRO's model states (16 B/param, no activations)."""
    panels = [(report, entry) for report in reports for entry in train_results(report)]
    if not panels:
        return None
    figure, axes = panel_grid(pyplot, len(panels), "memory per rank: measured (the ledger) and theory",
                              panel_height=3.8, most_columns=2)
    for axis, (report, entry) in zip(axes, panels):
        by_rank = entry.get("memory_bytes_by_rank") or [entry["memory_bytes"]]
        bars = [(f"rank {r}", categories_of(figures), figures.get("total_peak")) for r, figures in enumerate(by_rank)]
        if isinstance(entry.get("memory_predicted_bytes"), dict):
            predicted = entry["memory_predicted_bytes"]
            bars.append(("theory, largest rank:\nevery buffer", categories_of(predicted), predicted.get("total")))
        if isinstance(entry.get("memory_theoretical_bytes"), dict):
            zero = entry["memory_theoretical_bytes"]
            bars.append(("theory:\nZeRO 16 B/param", categories_of(zero), zero.get("total")))
        positions = range(len(bars))
        bottoms = [0.0] * len(bars)
        for name, colour in CATEGORIES:
            heights = [mib[name] for _, mib, _ in bars]
            axis.bar(positions, heights, 0.6, bottom=bottoms, color=colour, label=name)
            bottoms = [b + h for b, h in zip(bottoms, heights)]
        for x, (_, _, total) in zip(positions, bars):
            if total:
                axis.annotate(f"{total / (1 << 20):.2f}", (x, bottoms[x]), xytext=(0, 3), textcoords="offset points",
                              ha="center", fontsize=9)
        axis.set_xticks(list(positions), [label for label, _, _ in bars])
        axis.set_ylabel("MiB (peak per category)")
        axis.set_ylim(0, max(bottoms) * 1.15 or 1)
        axis.set_title(f"{report['_label']}: {entry.get('model', {}).get('name', '') if isinstance(entry.get('model'), dict) else entry.get('model', '')}"
                       f" ({layout_text(entry)})")
    figure_legend(figure, axes)
    return figure


def plot_bubble(pyplot, reports, args):
    panels = [(report, entry) for report in reports for entry in train_results(report)
              if isinstance(entry.get("bubble"), dict) and entry["bubble"].get("measured_per_stage")]
    if not panels:
        return None
    figure, axes = panel_grid(pyplot, len(panels), "pipeline bubble per stage: measured and formula",
                              panel_height=3.6, most_columns=2)
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
    figure_legend(figure, axes)
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
    pyplot.rcParams.update(STYLE)
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
        figure.savefig(path, dpi=DPI)
        pyplot.close(figure)
        print(path)
        written += 1
    if written == 0:
        sys.exit("error: nothing to plot: give collective or train reports")


if __name__ == "__main__":
    main()
