#!/usr/bin/env python3
"""Draws a parbench --trace file as a pipeline timeline: one row per rank, F/B/W boxes
labelled with their micro-batch, transfers waits and collectives in grey shades.

    scripts/plot/plot_timeline.py TRACE.json OUT.png [--step N]

Plots one timed step (the last by default), with time from that step's first event.
Needs matplotlib: when the python3 that runs this script lacks it, the script runs again
under one that has it, or in a plotting environment made from PyPI once (scripts/plot/plot_env.py).
"""
import argparse
import json
import sys

import plot_env  # scripts/plot/plot_env.py: matplotlib, whatever python3 runs this

plt = plot_env.pyplot()

# A slide's width: 1600 pixels, as scripts/plot/plot.py draws.
DPI = 160
WIDTH_INCHES = 1600 / DPI
COLOURS = {"F": "#4c72b0", "B": "#dd8452", "W": "#55a868"}
OTHER = {"p2p": "#c8c8c8", "collective": "#8c8c8c", "optimizer": "#5a5a5a"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--step", type=int, help="timed step to draw (default: the last)")
    args = parser.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    if not events:
        sys.exit(f"{args.trace}: no events (was it written by parbench train --trace?)")
    step = args.step if args.step is not None else max(e["args"]["step"] for e in events)
    events = [e for e in events if e["args"]["step"] == step]
    origin = min(e["ts"] for e in events)
    ranks = sorted(names)
    fig, ax = plt.subplots(figsize=(WIDTH_INCHES, 0.55 * len(ranks) + 1.9))
    for e in events:
        row = ranks.index(e["pid"])
        start, width = (e["ts"] - origin) / 1000.0, e["dur"] / 1000.0
        kind = e["name"][0] if e["cat"] == "compute" else None
        colour = COLOURS[kind] if kind else OTHER.get(e["cat"], "#dddddd")
        height = 0.8 if kind else 0.35
        ax.barh(row, width, left=start, height=height, color=colour, edgecolor="white" if kind else colour,
                linewidth=0.5)
        if kind and "microbatch" in e["args"]:
            label = str(e["args"]["microbatch"])
            if trace.get("otherData", {}).get("virtual_stages", 1) > 1:
                label += "." + str(e["args"]["stage"])
            ax.text(start + width / 2, row, label, ha="center", va="center", fontsize=7, color="white", clip_on=True)
    ax.set_yticks(range(len(ranks)), [names[r] for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("ms from the step's first event")
    meta = trace.get("otherData", {})
    ax.set_title(f"{meta.get('schedule', '?')}: pp {meta.get('pp')}, m {meta.get('microbatches')}, "
                 f"v {meta.get('virtual_stages')}, {meta.get('p2p')} p2p; step {step}; "
                 f"theoretical bubble {meta.get('theoretical_bubble', float('nan')):.3f}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in list(COLOURS.values()) + list(OTHER.values())]
    ax.legend(handles, ["F forward", "B backward", "W weight grad", "p2p (send / recv wait)", "collective",
                        "optimizer"], loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=6, fontsize=9,
              frameon=False)
    fig.tight_layout()
    fig.savefig(args.out, dpi=DPI)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
