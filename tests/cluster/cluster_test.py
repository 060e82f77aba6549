#!/usr/bin/env python3
"""Multi-host tests on the emulated cluster (scripts/cluster/cluster.sh): each case brings up its own
hosts, runs parbench across them as a user would, reads the JSON back and always tears the
cluster down, also when the case fails or ctest's timeout stops it. Needs root: without it
every case skips (exit 77) saying so.

Usage: cluster_test.py CASE --parbench BIN --cluster SCRIPT --schema SCHEMA
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import jsonschema

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import processes  # noqa: E402  (tests/support/processes.py)

SKIP = 77


class Skip(Exception):
    """This machine cannot run the case; the message says why."""


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def free_instance():
    """A PARBENCH_CLUSTER_ID no cluster on this machine uses now: its names (bridge, namespaces,
    /run folder) are this run's alone, so another suite's cluster is never torn down by ours."""
    candidates = list(range(1, 201))
    start = os.getpid() % len(candidates)
    for instance in candidates[start:] + candidates[:start]:
        taken = (os.path.exists(f"/run/parbench-cluster-{instance}") or os.path.exists(f"/sys/class/net/pbbr{instance}")
                 or os.path.exists(f"/run/netns/pb{instance}host0"))
        if not taken:
            return instance
    raise Skip("all 200 emulated-cluster instances are in use on this machine")


class Cluster:
    """One emulated cluster for the duration of a case, under its own PARBENCH_CLUSTER_ID."""

    def __init__(self, args):
        self.instance = free_instance()
        os.environ["PARBENCH_CLUSTER_ID"] = str(self.instance)  # every cluster.sh call of this run
        self.script = args.cluster
        self.parbench = args.parbench
        self.schema = json.load(open(args.schema))
        self.tmp = tempfile.mkdtemp(prefix="parbench-cluster-")

    def path(self, name):
        return os.path.join(self.tmp, name)

    def netns(self, host):
        """The network namespace of an emulated host (pbhost1 -> pb<instance>host1)."""
        return f"pb{self.instance}host{host[len('pbhost'):]}"

    def cluster(self, *arguments, timeout=120):
        result = subprocess.run([self.script, *arguments], capture_output=True, text=True, timeout=timeout)
        check(result.returncode == 0, f"cluster.sh {' '.join(arguments)}: exit {result.returncode}\n{result.stderr}")
        return result

    def up(self, hosts, *shaping):
        self.cluster("down")
        self.cluster("up", str(hosts), *shaping)

    def down(self):
        subprocess.run([self.script, "down"], capture_output=True, text=True, timeout=120)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run(self, ranks, *arguments, per_host=None, map_by="slot", timeout=300, expect=0):
        command = [self.script, "run", "-np", str(ranks), "--map-by", map_by]
        if per_host:
            command += ["--per-host", str(per_host)]
        command += ["--", self.parbench, *arguments]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        if expect is not None:
            check(result.returncode == expect,
                  f"{' '.join(arguments)}: exit {result.returncode}, expected {expect}\n"
                  f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        return result

    def report(self, name):
        report = json.load(open(self.path(name)))
        jsonschema.validate(report, self.schema)
        return report


def check_two_by_two(environment):
    check(environment["world_size"] == 4, f"world_size {environment['world_size']}")
    check(environment["hosts"] == ["pbhost0", "pbhost1"], f"hosts {environment['hosts']}")
    check(environment["ranks_per_host"] == {"pbhost0": 2, "pbhost1": 2},
          f"ranks_per_host {environment['ranks_per_host']}")


def case_info(c):
    c.up(2)
    result = c.run(4, "info", "--json", c.path("info.json"))
    info = json.load(open(c.path("info.json")))
    check([h["name"] for h in info["hosts"]] == ["pbhost0", "pbhost1"], f"info hosts {info['hosts']}")
    check([h["ranks"] for h in info["hosts"]] == [[0, 1], [2, 3]], "ranks 0-1 on pbhost0, 2-3 on pbhost1")
    check(info["ranks_per_host"] == {"pbhost0": 2, "pbhost1": 2}, f"ranks_per_host {info['ranks_per_host']}")
    check(info["launcher"] == "mpirun (Open MPI)", f"launcher {info['launcher']}")
    check("ranks:  4 on 2 hosts, 2 ranks per host" in result.stdout, result.stdout)
    check("launcher: mpirun (Open MPI)" in result.stdout, result.stdout)


def case_collectives(c):
    """Every collective validated across hosts (shared memory inside, TCP between)."""
    c.up(2)
    c.run(4, "all", "-b", "8", "-e", "1M", "-f", "64", "-w", "1", "-n", "2", "--check", "--json", c.path("all.json"))
    report = c.report("all.json")
    check_two_by_two(report["environment"])
    check(report["environment"]["hosts_by_rank"] == ["pbhost0", "pbhost0", "pbhost1", "pbhost1"],
          f"hosts_by_rank {report['environment']['hosts_by_rank']}")
    measured = {r["collective"] for r in report["results"] if "skipped" not in r}
    every = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "alltoallv", "gather",
             "scatter", "sendrecv"}
    check(measured == every, f"collectives measured: {sorted(measured)}")
    for r in report["results"]:
        if "skipped" not in r:
            check(r["wrong"] == 0, f"{r['collective']} {r['bytes']} B: {r['wrong']} wrong")


def train(c, name, map_by):
    result = c.run(4, "train", "--model", "gpt-tiny", "--dp", "2", "--tp", "2", "--steps", "2", "--warmup", "1",
                   "--check", "--json", c.path(name), map_by=map_by, timeout=400)
    report = c.report(name)
    check_two_by_two(report["environment"])
    train_result = report["results"][0]
    check(train_result["check"]["passed"], f"--check failed: {train_result['check']}")
    return result, train_result["layout"]["placement"]


def case_train_tp_inside_hosts(c):
    """Ranks packed by host: each tp group (consecutive ranks) on one host, dp across."""
    c.up(2)
    result, placement = train(c, "train.json", "slot")
    check(placement["group_hosts"]["tp"] == [["pbhost0"], ["pbhost1"]], f"tp groups' hosts {placement}")
    check(placement["group_hosts"]["dp"] == [["pbhost0", "pbhost1"], ["pbhost0", "pbhost1"]], f"dp {placement}")
    check(not placement["tp_crosses_hosts"], "tp_crosses_hosts should be false")
    check("spans hosts" not in result.stderr, result.stderr)


def case_train_tp_across_hosts(c):
    """Round-robin launch: the mesh's docs say tp then crosses hosts, is reported and warned
    about with the fix, and still trains the same model (--check passes)."""
    c.up(2)
    result, placement = train(c, "train-rr.json", "node")
    check(placement["tp_crosses_hosts"], f"tp_crosses_hosts should be true: {placement}")
    check(placement["group_hosts"]["tp"] == [["pbhost0", "pbhost1"], ["pbhost0", "pbhost1"]], f"{placement}")
    check("warning: tp group of ranks 0 1 spans hosts pbhost0 pbhost1" in result.stderr and "--map-by slot" in result.stderr,
          result.stderr)


def case_pairs_slow_host(c):
    """Four hosts of one rank, pbhost3's link shaped to a tenth: exactly its six ordered pairs
    are flagged, each naming both ranks and hosts, and pbhost3 is named the suspect."""
    c.up(4, "--inter-bw", "1gbit")
    c.cluster("shape", "pbhost3", "--bw", "100mbit")
    result = c.run(4, "pairs", "--size", "4M", "-n", "3", "--json", c.path("pairs.json"), per_host=1)
    pairs = c.report("pairs.json")["results"][0]
    check(pairs["rounds"] == 3, f"4 ranks need 3 rounds, took {pairs['rounds']}")
    check([p["host"] for p in pairs["participants"]] == ["pbhost0", "pbhost1", "pbhost2", "pbhost3"], str(pairs))
    flagged = {(f["from_rank"], f["to_rank"]) for f in pairs["flagged"]}
    expected = {(a, 3) for a in range(3)} | {(3, b) for b in range(3)}
    check(flagged == expected, f"flagged {sorted(flagged)}, expected {sorted(expected)}\n{result.stdout}")
    check(all("pbhost3" in (f["from_host"], f["to_host"]) for f in pairs["flagged"]), str(pairs["flagged"]))
    check(pairs["suspect_hosts"] == ["pbhost3"], f"suspects {pairs['suspect_hosts']}")
    check("slow pair: rank 0 (pbhost0) -> rank 3 (pbhost3)" in result.stdout, result.stdout)
    check("every slow pair involves pbhost3" in result.stdout, result.stdout)
    check(len(pairs["bandwidth_gbps"]) == 4 and pairs["bandwidth_gbps"][0][0] is None, "matrix shape, null diagonal")
    # Bad input: one rank, --by host on one host, a fraction out of range: exit 2, one line.
    for ranks, per_host, arguments, text in ((1, 1, [], "2 or more ranks"),
                                             (2, 2, ["--by", "host"], "--by host needs 2 or more hosts"),
                                             (2, 1, ["--flag-below", "1.5"], "--flag-below")):
        bad = c.run(ranks, "pairs", *arguments, per_host=per_host, expect=2)
        errors = [line for line in bad.stderr.splitlines() if line.startswith("error:")]
        check(len(errors) == 1 and text in errors[0], f"pairs {arguments}: {bad.stderr}")


def case_groups(c):
    """--groups host and cross-host on 2 hosts x 2 ranks: the groups' ranks and hosts, every
    group validated, the minimum across groups; with the link shaped to 100 Mbit/s (a ceiling
    of 0.0125 GB/s per direction) the groups inside a host beat every group across hosts."""
    c.up(2, "--inter-bw", "100mbit")
    figures = {}
    for placement, ranks, hosts in (("host", [[0, 1], [2, 3]], [["pbhost0"], ["pbhost1"]]),
                                    ("cross-host", [[0, 2], [1, 3]], [["pbhost0", "pbhost1"]] * 2)):
        name = f"groups-{placement}.json"
        result = c.run(4, "allreduce", "--size", "1M", "-w", "1", "-n", "3", "--check", "--groups", placement,
                       "--json", c.path(name))
        report = c.report(name)
        check(report["config"]["groups"] == placement, str(report["config"]))
        for point in report["results"]:
            groups = point["groups"]
            check([g["ranks"] for g in groups["members"]] == ranks, f"{placement}: {groups}")
            check([g["hosts"] for g in groups["members"]] == hosts, f"{placement}: {groups}")
            check(all(g["wrong"] == 0 for g in groups["members"]) and point["wrong"] == 0, f"{placement}: wrong")
            check(groups["busbw_min_gbps"] == min(g["busbw_gbps"] for g in groups["members"]), str(groups))
            check(point["bus_factor"] == 1.0, "groups of 2: allreduce's factor 2(n-1)/n is 1")
            figures.setdefault(placement, []).extend(g["busbw_gbps"] for g in groups["members"])
        check("#   groups:" in result.stdout, result.stdout)
    check(min(figures["host"]) > max(figures["cross-host"]),
          f"inside a host {figures['host']} should beat across the 100 Mbit/s link {figures['cross-host']}")
    for ranks, per_host, value, text in ((4, 2, "3", "does not divide the 4 ranks"),
                                         (2, 1, "host", "groups of 1 rank"),
                                         (4, 2, "rack", "--groups 'rack'")):
        bad = c.run(ranks, "allreduce", "--size", "1K", "--groups", value, per_host=per_host, expect=2)
        errors = [line for line in bad.stderr.splitlines() if line.startswith("error:")]
        check(len(errors) == 1 and text in errors[0], f"--groups {value}: {bad.stderr}")


def ranks_in_host(c, host):
    """World rank -> pid of the parbench ranks running in an emulated host's namespace."""
    listed = subprocess.run(["ip", "netns", "pids", c.netns(host)], capture_output=True, text=True,
                            timeout=30).stdout.split()
    ranks = {}
    for pid in listed:
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if comm.read().strip() != "parbench":
                    continue
        except OSError:
            continue
        rank = processes.world_rank(pid)
        if rank is not None:
            ranks[rank] = int(pid)
    return ranks


def case_watchdog_across_hosts(c):
    """2 hosts x 2 ranks, an allreduce sweep under --timeout; rank 3 (on pbhost1) is stopped. The
    watchdog's side channel reaches rank 0 from pbhost1 over the bridge (each namespace has its
    own loopback, so nothing else could carry it): the message names rank 3 and its host, the
    job ends with 124, every rank ends, and the report is kept as partial."""
    timeout_s, grace_s = 4, 10
    c.up(2)
    report_path = c.path("watch.json")
    output = open(c.path("watch.out"), "w+")
    command = [c.script, "run", "-np", "4", "--per-host", "2", "--", c.parbench, "allreduce", "-b", "8", "-e", "64M",
               "--iters", "30", "--timeout", str(timeout_s), "--json", report_path]
    job = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
                           env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))

    def text():
        output.flush()
        output.seek(0)
        return output.read()

    ranks = {}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (os.path.exists(report_path) and len(ranks) == 4):
            check(job.poll() is None, f"the job ended early:\n{text()}")
            ranks = {**ranks_in_host(c, "pbhost0"), **ranks_in_host(c, "pbhost1")}
            time.sleep(0.1)
        check(os.path.exists(report_path) and sorted(ranks) == [0, 1, 2, 3], f"ranks {ranks}, report? {text()}")
        check(3 in ranks_in_host(c, "pbhost1"), f"rank 3 is not on pbhost1: {ranks}")
        os.kill(ranks[3], signal.SIGSTOP)
        stopped = time.monotonic()
        named = None
        while time.monotonic() < stopped + timeout_s + 30 and job.poll() is None:
            if "error: watchdog" in text():
                named = time.monotonic()
                break
            time.sleep(0.05)
        status = job.wait(timeout=timeout_s + 40)
        log = text()
        check(named is not None or "error: watchdog" in log, f"no watchdog message:\n{log}")
        line = [l for l in log.splitlines() if l.startswith("error: watchdog")][0]
        check("rank 3 (pbhost1) stopped answering" in line.split(". Last reports")[0], line)
        check(status == 124, f"exit {status}, want 124:\n{log}")
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(processes.running(pid) for pid in ranks.values()):
            time.sleep(0.05)
        survivors = [rank for rank, pid in ranks.items() if processes.running(pid)]
        check(not survivors, f"ranks {survivors} still ran {grace_s} s after mpirun ended")
        report = c.report("watch.json")
        check(report["status"] == "partial" and "watchdog" in report["status_reason"], f"status {report['status']}")
        took = (named or time.monotonic()) - stopped
        print(f"SIGSTOP rank 3 on pbhost1: message after {took:.2f} s (--timeout {timeout_s}), every rank gone, report "
              f"partial with {len(report['results'])} points: {line}")
    finally:
        for pid in ranks.values():
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        output.close()


def case_host_straggler(c):
    """pbhost1 made a slow host by a real cap, not an injected sleep: its two ranks share 0.05 of
    a core (a cgroup's CPU quota, 1 ms per 20 ms period), and each step's compute (24 samples
    per rank: since the vectorised ops, 8 took only ~5 ms and the cap bit in some steps only) needs many quotas, so it stretches on pbhost1 while pbhost0's ranks compete only
    with the machine's other load: 2 cores shared by 12 runnable tasks still give each of them
    about three times pbhost1's share. Training names pbhost1 as the slowest host (by the mean
    over its ranks, though the two take turns at being the slowest rank), says how much slower
    it is than the median other host, and suggests pairs."""
    c.up(2)
    throttle = subprocess.run([c.script, "throttle", "pbhost1", "--cpu", "0.05"], capture_output=True, text=True,
                              timeout=60)
    if throttle.returncode == 2 and "no cgroup CPU controller" in throttle.stderr:
        raise Skip(throttle.stderr.strip())
    check(throttle.returncode == 0, f"throttle: exit {throttle.returncode}\n{throttle.stderr}")
    result = c.run(4, "train", "--model", "gpt-tiny", "--dp", "4", "--global-batch", "96", "--steps", "6", "--warmup", "1",
                   "--json", c.path("slow-host.json"), timeout=400)
    train_result = c.report("slow-host.json")["results"][0]
    host = train_result["stragglers"]["slowest_host"]
    check(host is not None and host["host"] == "pbhost1" and host["consistent"],
          f"pbhost1 was capped, but the report names {host}\n{result.stdout}")
    check(host["ranks"] == 2 and host["steps"] == 6 and host["steps_slowest"] >= 5, str(host))
    check(host["compute_ms"] >= 1.25 * host["others_median_ms"], str(host))
    check(set(host["compute_ms_by_host"]) == {"pbhost0", "pbhost1"}, str(host))
    output = result.stdout + result.stderr
    named = "stragglers: host pbhost1 (2 ranks) is the slowest host in"
    check(named in output and "against" in output and "parbench pairs --by host" in output, output)
    check(any(w.startswith(named) for w in train_result["warnings"]), str(train_result["warnings"]))
    check("straggler host (compute)" in result.stdout, result.stdout)
    print(f"pbhost1 {host['compute_ms']:.1f} ms against {host['others_median_ms']:.1f} ms on pbhost0, slowest in "
          f"{host['steps_slowest']} of {host['steps']} steps")
    # Lifted, the cap is gone for the next run.
    c.cluster("throttle", "pbhost1", "--cpu", "off")
    for bad, text in ((["pbhost1", "--cpu", "0.001"], "--cpu '0.001'"), (["pbhost9", "--cpu", "0.5"], "'pbhost9'"),
                      (["pbhost1", "--cpu", "lots"], "--cpu 'lots'")):
        refused = subprocess.run([c.script, "throttle", *bad], capture_output=True, text=True, timeout=60)
        check(refused.returncode == 2 and len(refused.stderr.splitlines()) == 1 and text in refused.stderr,
              f"throttle {bad}: exit {refused.returncode}: {refused.stderr}")


def case_intra_bw(c):
    """--intra-bw: ranks of one host talk TCP over the host's loopback, shaped, instead of shared
    memory. With 100 Mbit/s inside hosts and 10 Gbit/s between, the groups inside a host run
    through each host's shaped lo (its tc counters carry the traffic) and stay under the rate."""
    c.up(2, "--inter-bw", "10gbit", "--intra-bw", "100mbit")
    size = 1 << 20
    c.run(4, "allreduce", "--size", "1M", "-w", "1", "-n", "3", "--check", "--groups", "host",
          "--json", c.path("intra.json"))
    point = c.report("intra.json")["results"][0]
    check(point["wrong"] == 0, f"wrong {point['wrong']}")
    ceiling_gbps = 100e6 / 8 / 1e9  # the shaped rate in GB/s: no group can beat it
    for group in point["groups"]["members"]:
        check(group["busbw_gbps"] < ceiling_gbps, f"group {group['ranks']}: {group['busbw_gbps']} GB/s is above "
                                                  f"the {ceiling_gbps} GB/s of the shaped loopback")
    for host in ("pbhost0", "pbhost1"):
        stats = subprocess.run(["ip", "netns", "exec", c.netns(host), "tc", "-s", "qdisc", "show", "dev", "lo"],
                               capture_output=True, text=True, timeout=30).stdout
        check("tbf" in stats, f"{host}'s lo is not shaped:\n{stats}")
        sent = [int(word) for line in stats.splitlines() if line.strip().startswith("Sent")
                for word in [line.split()[1]]]
        # 4 timed and warmup allreduces of 1 MiB between 2 ranks each send 1 MiB per rank.
        check(sent and sent[0] >= 4 * size, f"{host}'s shaped lo carried {sent} bytes:\n{stats}")


CASES = {name[len("case_"):]: f for name, f in globals().items() if name.startswith("case_")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--parbench", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--schema", required=True)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("SKIP: the emulated cluster needs root (network namespaces, bridge, tc)")
        return SKIP
    try:
        c = Cluster(args)
    except Skip as reason:
        print(f"SKIP: {reason}")
        return SKIP
    # ctest's timeout sends SIGTERM: turn it into an exception so the cluster comes down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
    try:
        CASES[args.case](c)
    except Skip as reason:
        print(f"SKIP: {reason}")
        return SKIP
    finally:
        c.down()
    print(f"ok: {args.case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
