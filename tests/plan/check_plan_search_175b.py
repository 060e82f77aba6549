#!/usr/bin/env python3
"""plan --search for GPT-3 175B on 1024 A100s (global batch 1536, sequence 2048; arXiv 2104.04473
sec. 5, its 175B runs), Megatron's byte convention, selective recompute, flash attention: no ZeRO-3
layout may rank above the published layout, tensor 8 x pipeline 16 x data 8 with the interleaved
schedule (the paper measured ZeRO-3 1.7-3.2x slower), which must fit and be ranked; every leader
carries its margin against #1. Prints the top layouts, and the published one's rank and margin.

Not asserted, because plan does not predict it: the published layout among the top 3. plan ranks
it about 8.6 % behind tensor 2-4 layouts (#32 of 250 that fit). The terms, published against #1
(dp32 tp2+sp pp16 interleaved v6): compute 15.59 s against 15.42 (the same work per GPU, tp 8's
smaller GEMMs a little less efficient), bubble 0.20 against 0.80 (4 times the micro-batches),
dp and pp exposed within 0.04 s of each other (per GPU the same bytes: the dp group and the stage
boundary cross hosts on as many NICs as the group has members per host), and tensor-parallel
collectives exposed 2.32 s against 0.34: a tp group carries 1/dp of the batch, so each GPU's tp
bytes grow as t - 1 at a fixed pp. That is the arithmetic of arXiv 2104.04473 itself (its sec. 3.3
takeaway: a model-parallel size t x p just large enough to fit, data parallelism beyond), and no
published measurement of tp 2-4 layouts at this scale says otherwise; tp 8 is what both papers'
tables ran, which the A100 curve is fitted on. Asserting the rank would need a modelled cost that
the papers show to be wrong, and none was found; the test holds what plan does predict.

  check_plan_search_175b.py PARBENCH OUT_DIR
"""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def main():
    parbench, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    report = os.path.join(out, "search-175b.json")
    command = [parbench, "plan", "--model", "gpt3-175b", "--cluster",
               os.path.join(ROOT, "configs", "clusters", "a100-dgx.json"), "--gpus", "1024", "--global-batch", "1536",
               "--states", "megatron", "--recompute", "selective", "--search", "--top", "100", "--json", report,
               # Micro-batch counts that divide 1536 / dp, the paper's 192 (micro-batch 1 at d 8) among them.
               "--microbatch-list", "1,2,4,8,16,32,48,64,96,128,192,256,384,512"]
    run = subprocess.run(command, capture_output=True, text=True)
    print(run.stdout)
    if run.returncode != 0:
        print(run.stderr)
        return 1
    with open(report) as f:
        document = json.load(f)
    layouts = document["layouts"]
    published = None
    for rank, layout in enumerate(layouts, 1):
        l = layout["layout"]
        if (l["tp"], l["pp"], l["dp"], l["schedule"]) == (8, 16, 8, "interleaved"):
            published = rank
            break
    failures = []
    if published is None:
        failures.append("t8 p16 d8 interleaved is not in the top 100")
    else:
        margin = layouts[published - 1]["time_ms"]["step"] / layouts[0]["time_ms"]["step"] - 1
        print(f"published layout t8 p16 d8 interleaved ranks #{published} ({100 * margin:+.1f} % against #1): "
              f"{layouts[published - 1]['label']}")
        # Where the published layout's time goes against #1's: the cause of its rank, term by term.
        for name, x in (("#1", layouts[0]), (f"#{published}", layouts[published - 1])):
            t = x["time_ms"]
            print(f"  {name:>4} {x['label']}: " + ", ".join(
                f"{key} {t[key]:.0f}" for key in ("compute", "bubble", "exposed_tp", "exposed_dp", "exposed_pp",
                                                  "optimizer", "step")) + " ms")
        above = [x["label"] for x in layouts[:published - 1] if x["layout"]["zero"] == 3]
        if above:
            failures.append(f"ZeRO-3 layouts rank above the published one: {above}")
    leaders = document["search"]["leaders"]
    if not leaders or leaders[0]["margin_vs_first"] != 0 or "within_error_of_first" not in leaders[0]:
        failures.append("search.leaders lacks the margins against #1")
    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
