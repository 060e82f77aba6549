#!/usr/bin/env python3
"""parbench side by side with the Intel MPI Benchmarks and the OSU micro-benchmarks.

Runs, in rounds, parbench with the flags that reproduce each peer's method (docs/reproducing.md),, IMB-MPI1 and the OSU collective latency tests, on the
same ranks and sizes, the three back to back at each point, and prints for every figure
the lower quartile over the rounds' processes (--statistic) and parbench's ratio of those
to the peer's, and as a control IMB's ratio to OSU's: how closely two tools of the same
method agree on this machine in the same run. The peers are
not part of parbench: build them yourself from their public sources and point this script
at the binaries.

    scripts/bench/compare_peers.py --imb /path/IMB-MPI1 --osu /path/osu/mpi/collective \\
        [--parbench build/parbench] [--np 2] [--rounds 5] [--json out.json] [--markdown] \\
        [--parbench-flags "..."] [--no-imb-placement] [--collectives allreduce,alltoall] [--drift]

--drift judges every point as the CI's peer-drift guard does (scripts/bench/peer_drift.py: parbench's
busbw ratio to each peer against the peers' own, with parbench compare's between-run noise
model, each round's process one run) and exits 1 where parbench drifted. The JSON records the host's transparent
huge page setting and the pages parbench's buffers got (its reports' environment.buffer_pages):
run it once per setting to see a figure's dependence on them (docs/reproducing.md).

Sizes follow the peers' convention (IMB's #bytes, OSU's Size): the whole buffer for
allreduce, reduce and broadcast, each rank's contribution for allgather and each
per-peer block for alltoall. parbench's size is the full buffer (nccl-tests'
convention), so for those two the script asks parbench for np times the size.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_drift  # noqa: E402  (beside this script)

COLLECTIVES = {
    # parbench name: (IMB benchmark, OSU binary, parbench size = peer size x this (per rank count))
    "allreduce": ("Allreduce", "osu_allreduce", False),
    "allgather": ("Allgather", "osu_allgather", True),
    "alltoall": ("Alltoall", "osu_alltoall", True),
    "broadcast": ("Bcast", "osu_bcast", False),
    "reduce": ("Reduce", "osu_reduce", False),
}
DEFAULT_SIZES = [8, 1024, 65536, 1 << 20, 4 << 20]
SMALL = peer_drift.SMALL  # OSU's iteration switch: 1000 iterations + 200 warm-up below, 100 + 10 above

# The parbench flags that reproduce IMB-MPI1's and OSU's method: each iteration timed
# alone between barriers, every rank's mean over iterations, then the mean (t_avg, OSU's
# average) or the max (t_max) over ranks; separate send and receive buffers.
PARBENCH_METHOD = peer_drift.PARBENCH_METHOD


def lower_quartile(values):
    values = list(values)
    return statistics.quantiles(values, n=4, method="inclusive")[0] if len(values) > 1 else values[0]


# Over the rounds' processes of one tool at one point; the JSON carries all three.
STATISTICS = {"quartile": lower_quartile, "best": min, "median": statistics.median}


def mpirun(args, np, preload=None):
    base = ["mpirun", "--allow-run-as-root", "-np", str(np)] + (["-x", f"LD_PRELOAD={preload}"] if preload else [])
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    result = subprocess.run(base + args, capture_output=True, text=True, env=env, timeout=900)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(args[:2])} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout if not preload else result.stdout + result.stderr


def run_parbench(parbench, np, name, size, workdir, extra_flags):
    """{"rank-mean": us, "rank-max": us} of one parbench process at one collective and size, and
    the pages its buffers got."""
    scale = np if COLLECTIVES[name][2] else 1
    iters, warmup = ("1000", "200") if size <= SMALL else ("100", "10")
    report = os.path.join(workdir, f"{name}.json")
    mpirun([parbench, name, "--size", str(size * scale), "--iters", iters, "--warmup", warmup, *PARBENCH_METHOD,
            *extra_flags, "--quiet", "--json", report], np)
    document = json.load(open(report))
    entry = document["results"][0]
    pages = document["environment"].get("buffer_pages", {}).get("obtained", "unrecorded")
    return {"rank-mean": entry["reported_time_us"], "rank-max": entry["aggregates_us"]["rank-max"]}, pages


def run_imb(imb, np, name, size, workdir):
    """{"t_avg": us, "t_max": us} of one IMB-MPI1 process at one collective and size, with OSU's
    iteration counts (IMB's own policy would pick fewer repetitions for large sizes)."""
    iters = "1000" if size <= SMALL else "100"
    lengths = os.path.join(workdir, "imb-lengths.txt")
    with open(lengths, "w") as out:
        out.write(f"{size}\n")
    text = mpirun([imb, COLLECTIVES[name][0], "-msglen", lengths, "-npmin", str(np), "-iter", iters, "-iter_policy",
                   "off"], np)
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 5 and fields[0].isdigit() and int(fields[0]) == size:
            return {"t_avg": float(fields[4]), "t_max": float(fields[3])}
    sys.exit(f"error: no {size} B row in IMB-MPI1's {name} output:\n{text}")


def imb_buffer_bytes(name, size, np):
    """IMB-MPI1's send and receive buffer lengths at one point (its #bytes convention)."""
    if name == "allgather":
        return size, np * size
    if name == "alltoall":
        return np * size, np * size
    return size, size


def build_alloc_spy(workdir):
    """scripts/bench/peers/mpi_alloc_spy.c as a shared object, with the mpicc that built the peers."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "mpi_alloc_spy.c")
    target = os.path.join(workdir, "mpi_alloc_spy.so")
    built = subprocess.run(["mpicc", "-shared", "-fPIC", "-O2", source, "-o", target, "-ldl"], capture_output=True,
                           text=True)
    if built.returncode != 0:
        sys.exit(f"error: building {source} failed (needs mpicc; or pass --no-imb-placement):\n{built.stderr}")
    return target


def imb_placement(imb, spy, np, name, size, workdir):
    """Where IMB-MPI1's send and receive buffers start past a page on every rank, as parbench's
    --buffer-offsets value (S0,R0:S1,R1:...), from one short IMB run under the MPI_Alloc_mem
    spy: IMB allocates the send buffer, then the receive buffer, from glibc's heap, so on a
    rank the two are neighbours (64 KiB ones 16 bytes apart modulo 4096, which makes IMB slow
    there: docs/reproducing.md) while each rank's heap puts them elsewhere."""
    send_bytes, recv_bytes = imb_buffer_bytes(name, size, np)
    lengths = os.path.join(workdir, "imb-lengths.txt")
    with open(lengths, "w") as out:
        out.write(f"{size}\n")
    text = mpirun([imb, COLLECTIVES[name][0], "-msglen", lengths, "-npmin", str(np), "-iter", "1", "-iter_policy",
                   "off"], np, preload=spy)
    pairs = []
    for rank in range(np):
        allocations = [(int(f[4]), int(f[6])) for f in (line.split() for line in text.splitlines())
                       if len(f) == 7 and f[0] == "alloc-spy" and f[2] == str(rank)]
        found = [(first[1], second[1]) for first, second in zip(allocations, allocations[1:])
                 if first[0] == send_bytes and second[0] == recv_bytes]
        if not found:
            sys.exit(f"error: the spy saw no {send_bytes} B then {recv_bytes} B MPI_Alloc_mem on rank {rank} for "
                     f"IMB's {name}: {allocations}")
        pairs.append(found[-1])
    return ":".join(f"{send},{recv}" for send, recv in pairs)


def run_osu(osu_dir, np, name, size):
    """{"avg": us} of one OSU process at one collective and size (-m SIZE:SIZE)."""
    text = mpirun([os.path.join(osu_dir, COLLECTIVES[name][1]), "-f", "-m", f"{size}:{size}"], np)
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0].isdigit() and int(fields[0]) == size:
            return {"avg": float(fields[1]), "max": float(fields[3])}
    sys.exit(f"error: no {size} B row in {COLLECTIVES[name][1]}'s output:\n{text}")


def measure_rounds(args, sizes, workdir):
    """Per round, per point, the three tools back to back in an order that rotates with the
    round and the point: the machine's slow drifts then touch every tool alike, and each
    round's three figures of a point are seconds apart (the paired ratios compare those)."""
    rounds = []
    pages = set()
    points = [(name, size) for name in args.collectives for size in sizes]
    tools = ["parbench", "imb", "osu"]
    # parbench's figure for IMB puts every rank's buffers where IMB's land on that rank.
    placement = {}
    if not args.no_imb_placement:
        spy = build_alloc_spy(workdir)
        placement = {point: imb_placement(args.imb, spy, args.np, *point, workdir) for point in points}
    for r in range(args.rounds):
        figures = {}
        for index, (name, size) in enumerate(points):
            shift = (r + index) % 3
            for tool in tools[shift:] + tools[:shift]:
                if tool == "parbench":
                    value, obtained = run_parbench(args.parbench, args.np, name, size, workdir,
                                                   args.parbench_flags.split())
                    pages.add(obtained)
                    figures.setdefault((name, size), {}).update({"parbench_" + k: v for k, v in value.items()})
                    if (name, size) in placement:
                        value, obtained = run_parbench(args.parbench, args.np, name, size, workdir,
                                                       args.parbench_flags.split() +
                                                       ["--buffer-offsets", placement[(name, size)]])
                        pages.add(obtained)
                    figures[(name, size)].update({"parbench_imb_" + k: v for k, v in value.items()})
                elif tool == "imb":
                    value = run_imb(args.imb, args.np, name, size, workdir)
                    figures.setdefault((name, size), {}).update({"imb_" + k: v for k, v in value.items()})
                else:
                    value = run_osu(args.osu, args.np, name, size)
                    figures.setdefault((name, size), {}).update({"osu_" + k: v for k, v in value.items()})
        rounds.append(figures)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    return rounds, placement, sorted(pages)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--imb", help="the IMB-MPI1 binary you built")
    parser.add_argument("--osu", default="", help="the folder holding osu_allreduce, osu_bcast, ...")
    parser.add_argument("--parbench", default="build/parbench")
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="bytes, peers' convention")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES), help="a comma-separated subset")
    parser.add_argument("--drift", action="store_true",
                        help="judge each point as the CI's peer-drift guard does and exit 1 where parbench drifted")
    parser.add_argument("--parbench-flags", default="", help="more flags for every parbench run")
    parser.add_argument("--no-imb-placement", action="store_true",
                        help="compare IMB with parbench's default buffers, not with IMB's placement of them")
    parser.add_argument("--statistic", choices=list(STATISTICS), default="quartile",
                        help="over rounds: the lower quartile of the processes (default: this VM's processes fall "
                             "into modes up to 2x apart, which makes a median a coin toss between modes, and the "
                             "best of many is one lucky process), the best or the median")
    parser.add_argument("--json", help="write every round's figures and each statistic of them here")
    parser.add_argument("--from-json", help="tabulate the figures of an earlier --json instead of measuring")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--resample", type=int, default=0, metavar="N",
                        help="also estimate, from N bootstrap resamples of the rounds' processes, how many points a "
                             "run of as many rounds puts beyond 15 %% for each pair by the machine's noise alone, "
                             "and name the points beyond in 90 %% of resamples or more: misses this noise does not "
                             "explain")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    args.collectives = args.collectives.split(",")
    unknown = [name for name in args.collectives if name not in COLLECTIVES]
    if unknown:
        parser.error(f"--collectives: {', '.join(unknown)} unknown; choose from {', '.join(COLLECTIVES)}")
    thp = peer_drift.thp_setting()
    if args.from_json:  # tabulate a previous run's figures again
        earlier = json.load(open(args.from_json))
        sizes, args.rounds, args.np = earlier["sizes"], earlier["rounds"], earlier["np"]
        split = lambda key: (key.split()[0], int(key.split()[1]))
        rounds = [{split(k): v for k, v in r.items()} for r in earlier["raw"]]
        args.collectives = [name for name in COLLECTIVES if any(point[0] == name for point in rounds[0])]
        placement = {} if args.no_imb_placement else {split(k): v for k, v in earlier.get("imb_buffer_offsets", {}).items()}
        pages, thp = earlier.get("parbench_pages", []), earlier.get("thp", {})
    else:
        for path in (args.imb, args.parbench, os.path.join(args.osu, "osu_allreduce")):
            if not path or not os.access(path, os.X_OK):
                sys.exit(f"error: {path} is not an executable; build it first (see the script's help)")
        with tempfile.TemporaryDirectory(prefix="parbench-peers-") as workdir:
            rounds, placement, pages = measure_rounds(args, sizes, workdir)
    # (peer figure, parbench figure compared with it, column headers): IMB beside parbench with
    # its own buffers and with IMB's placement of them; IMB's t_max is in the JSON only.
    pairs = [("imb_t_avg", "parbench_rank-mean", "IMB t_avg", "parbench"),
             ("imb_t_avg", "parbench_imb_rank-mean", None, "parbench, IMB's buffers"),
             ("osu_avg", "parbench_rank-mean", "OSU avg", "parbench")]
    if not placement:  # parbench's figure for IMB is the default one
        pairs = [pair for pair in pairs if pair[1] != "parbench_imb_rank-mean"]
    # The control: the two peers against each other, to show how closely two tools of the same
    # method can agree on this machine in this run.
    control = ("osu_avg", "imb_t_avg", None, "IMB t_avg")
    json_pairs = pairs + [control, ("imb_t_max", "parbench_imb_rank-max" if placement else "parbench_rank-max", None,
                                    None)]
    pick = STATISTICS[args.statistic]
    rows = []
    for name in args.collectives:
        for size in sizes:
            per_round = [r[(name, size)] for r in rounds]
            row = {"collective": name, "bytes": size}
            for field in sorted({f for figures in per_round for f in figures}):
                for statistic, pick_over_rounds in STATISTICS.items():
                    row[f"{field}_{statistic}_us"] = pick_over_rounds(f[field] for f in per_round)
            for peer, mine, _, _ in json_pairs:
                row[f"ratio_{mine}_to_{peer}"] = pick(f[mine] for f in per_round) / pick(f[peer] for f in per_round)
            rows.append(row)

    header = ["collective", "size (B)"]
    for _, _, peer_header, mine_header in pairs:
        header += ([peer_header] if peer_header else []) + [mine_header, "ratio"]
    header.append("IMB/OSU")
    lines = []
    for row in rows:
        cells = [row["collective"], str(row["bytes"])]
        for peer, mine, peer_header, _ in pairs:
            suffix = f"_{args.statistic}_us"
            cells += ([fmt(row[peer + suffix])] if peer_header else []) + [fmt(row[mine + suffix])]
            cells.append(f"{row[f'ratio_{mine}_to_{peer}']:.2f}")
        cells.append(f"{row[f'ratio_{control[1]}_to_{control[0]}']:.2f}")
        lines.append(cells)
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + " --- |" * len(header))
        for cells in lines:
            print("| " + " | ".join(cells) + " |")
    else:
        widths = [max(len(h), *(len(c[i]) for c in lines)) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for cells in lines:
            print("  ".join(c.rjust(w) for c, w in zip(cells, widths)))
    resampled = {}
    for peer, mine, _, mine_header in pairs + [control]:
        ratios = [row[f"ratio_{mine}_to_{peer}"] for row in rows]
        within = sum(1 for v in ratios if abs(v - 1) <= 0.15)
        print(f"# {mine_header} against {peer}: {within} of {len(ratios)} within 15 %", file=sys.stderr)
        if args.resample > 0:
            chances = miss_chances(rounds, mine, peer, pick, args.resample)
            resampled[f"{mine}_to_{peer}"] = chances
            firm = [f"{name} {size} B" for (name, size), chance in chances.items() if chance >= 0.9]
            print(f"#   resampled {args.resample}x: {sum(chances.values()):.1f} points beyond 15 % per run expected; "
                  f"beyond in 90 % of resamples: {', '.join(firm) or 'none'}", file=sys.stderr)
    described = {"quartile": "lower quartile", "best": "best", "median": "median"}[args.statistic]
    print(f"# times in us, the {described} of {args.rounds} processes per tool and point at {args.np} ranks; "
          f"THP {thp.get('enabled', '?')} (defrag {thp.get('defrag', '?')}), parbench's buffers on "
          f"{', '.join(pages) or 'unrecorded'} pages", file=sys.stderr)
    verdicts = None
    if args.drift:
        figures = {point: {"parbench": [r[point]["parbench_rank-mean"] for r in rounds],
                           "IMB": [r[point]["imb_t_avg"] for r in rounds], "OSU": [r[point]["osu_avg"] for r in rounds]}
                   for point in rounds[0]}
        verdicts = peer_drift.judge(args.parbench, figures, args.np, peers=("IMB", "OSU"))
        print("# drift: busbw ratios to each peer, intervals over the rounds' processes as runs, 95 % for all "
              "together (scripts/bench/peer_drift.py)", file=sys.stderr)
        peer_drift.print_verdicts(verdicts, sys.stderr)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"np": args.np, "rounds": args.rounds, "sizes": sizes, "thp": thp, "parbench_pages": pages,
                       "parbench_flags": PARBENCH_METHOD + args.parbench_flags.split(),
                       "imb_buffer_offsets": {f"{k[0]} {k[1]}": v for k, v in placement.items()},
                       "rows": rows,
                       **({"resampled_miss_chance": {pair: {f"{k[0]} {k[1]}": v for k, v in chances.items()}
                                                     for pair, chances in resampled.items()}} if resampled else {}),
                       **({"drift": verdicts} if verdicts is not None else {}),
                       "raw": [{f"{k[0]} {k[1]}": v for k, v in r.items()} for r in rounds]}, out, indent=1)
    if verdicts is not None and any(v["drift"] for v in verdicts):
        print("error: parbench drifted from a peer beyond the peers' own disagreement and the noise (above)",
              file=sys.stderr)
        sys.exit(1)


def miss_chances(rounds, mine, peer, pick, resamples):
    """Per point, the share of bootstrap runs (each tool's processes drawn again with
    replacement, as many as there were rounds) whose ratio of `mine` to `peer` is beyond 15 %."""
    draw = random.Random(12345)  # a fixed seed: the same report gives the same estimate
    chances = {}
    for point in rounds[0]:
        ours = [r[point][mine] for r in rounds]
        theirs = [r[point][peer] for r in rounds]
        beyond = 0
        for _ in range(resamples):
            ratio = pick(draw.choices(ours, k=len(ours))) / pick(draw.choices(theirs, k=len(theirs)))
            beyond += abs(ratio - 1) > 0.15
        chances[point] = beyond / resamples
    return chances


def fmt(value):
    return f"{value:.2f}" if value is not None else "-"


if __name__ == "__main__":
    main()
