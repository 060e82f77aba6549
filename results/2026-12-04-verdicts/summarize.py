#!/usr/bin/env python3
"""Markdown tables of the reports run.sh wrote (docs/verdicts.md quotes them)."""
import glob
import json
import os

here = os.path.dirname(os.path.abspath(__file__))


def load(name):
    return json.load(open(os.path.join(here, name)))


def verdict_table():
    print("| ranks | collective | bytes | time us | busbw GB/s | expected GB/s | algorithm | bound | ratio | verdict |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |")
    for np in (2, 3, 4):
        report = load(f"verdicts-np{np}.json")
        for p in report["results"]:
            if "skipped" in p:
                continue
            e = p["expected"]
            print(f"| {np} | {p['collective']} | {p['bytes']} | {p['reported_time_us']:.1f} | {p['busbw_gbps']:.2f} | "
                  f"{e['busbw_gbps']:.2f} | {e['algorithm']} | {e['bound']} | {p['ratio']:.2f} | {p['verdict']} |")


def host_table():
    print("| ranks | step us | first step us | working set | exchange GB/s | reduce GB/s | memcpy GB/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for np in (2, 3, 4):
        h = load(f"verdicts-np{np}.json")["expected_model"]["host"]
        for b in h["bandwidths"]:
            print(f"| {np} | {h['step_latency_us']:.2f} | {h['call_latency_us']:.2f} | {b['working_set_bytes'] >> 10} KiB | "
                  f"{b['exchange_gbps']:.2f} | {b['reduce_gbps']:.2f} | {b['copy_gbps']:.2f} |")


def verdict_counts():
    for np in (2, 3, 4):
        counts = {}
        for p in load(f"verdicts-np{np}.json")["results"]:
            if "verdict" in p:
                counts[p["verdict"]] = counts.get(p["verdict"], 0) + 1
        print(f"- {np} ranks: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def background_table():
    print("| collective | bytes | load | alone us | under load us | slowdown | load alone | load with collective | unit | wrong |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for collective in ("allreduce", "alltoall"):
        for load_name in ("gemm", "stream", "collective"):
            report = load(f"background-{collective}-{load_name}.json")
            for p in report["results"]:
                b = p["background"]
                print(f"| {collective} | {p['bytes']} | {b['load']} | {b['time_alone_us']:.1f} | {b['time_loaded_us']:.1f} | "
                      f"{b['slowdown']:.2f} | {b['load_alone']:.2f} | {b['load_with_collective']:.2f} | {b['unit']} | "
                      f"{b['wrong_loaded']} |")


def moe_table():
    print("| ranks | skew | phase | time med us | min | max | slowest rank (us) | fastest rank (us) | send GB/s mean (min r, max r) "
          "| recv GB/s mean | ep_bench send/recv GB/s | recv max/mean | expert max/mean | wrong |")
    print("| ---: | --- | --- | ---: | ---: | ---: | --- | --- | --- | ---: | --- | ---: | ---: | ---: |")
    for np in (2, 4):
        for skew in ("uniform", "zipf-1.2", "hot-1"):
            report = load(f"moe-np{np}-{skew}.json")
            for p in report["results"]:
                t = p["time_us"]
                bw = p["bandwidth_gbps"]
                s = bw["send"]
                im = p["imbalance"]
                print(f"| {np} | {skew.replace('-', ':')} | {p['moe_phase']} | {t['median']:.0f} | {t['min']:.0f} | {t['max']:.0f} | "
                      f"r{p['slowest_rank']['rank']} ({p['slowest_rank']['median_us']:.0f}) | "
                      f"r{p['fastest_rank']['rank']} ({p['fastest_rank']['median_us']:.0f}) | "
                      f"{s['mean']:.2f} ({s['min']:.2f} r{s['min_rank']}, {s['max']:.2f} r{s['max_rank']}) | "
                      f"{bw['receive']['mean']:.2f} | {bw['ep_bench_send']['mean']:.2f}/{bw['ep_bench_receive']['mean']:.2f} | "
                      f"{im['received_bytes_max_over_mean']:.2f} | {im['expert_load_max_over_mean']:.2f} | {p['wrong']} |")


for title, table in (("host", host_table), ("verdicts", verdict_table), ("counts", verdict_counts),
                     ("background", background_table), ("moe", moe_table)):
    print(f"\n### {title}\n")
    table()
