#!/usr/bin/env bash
# compare's gate against this machine's run-to-run noise (issue 32; a benchmark, never a CI test):
# the same 2-rank sweep run RUNS times (each --repeat K sweeps in one job), then every run
# compared with the next (run i against run i+1, the last against the first) at --threshold 0.9:
# pairs of identical runs, which must pass; then RUNS runs of the sweep with a planted 0.7x
# slowdown (--inject-slowdown 0.7: every rank stretches each timed op, so busbw reads 0.7x),
# each compared with the unplanted run before it: every pair must fail (exit 3). Planted and
# plain runs alternate, so a slow spell of a shared machine falls on both. Prints each pair's
# exit status and points beyond the noise, then the tallies; exit 1 when a tally misses its aim
# (at least 19 of 20 identical pairs passing, every planted pair failing).
# Usage: scripts/bench/bench_compare_gate.sh [build-dir] [runs] [repeat] [sweep arguments...]
#        (default: build/; 20; 5; allreduce -b 8K -e 512K -f 4 --iters 20)
set -euo pipefail
source "$(dirname "$0")/bench_common.sh" "${1:-}"
runs=${2:-20}
repeat=${3:-5}
sweep=("${@:4}")
((${#sweep[@]})) || sweep=(allreduce -b 8K -e 512K -f 4 --iters 20)

run() {  # run NAME [FLAGS...]: one report, $out/NAME.json
  local name=$1
  shift
  "${mpi[@]}" -np 2 "$parbench" "${sweep[@]}" --repeat "$repeat" --quiet "$@" --json "$out/$name.json" \
    2>"$out/$name.err" || { cat "$out/$name.err" >&2; exit 1; }
}

echo "machine: $(machine_description), $(uptime | sed 's/.*load average: /load /') (shared: other work runs beside it)"
echo "sweep: parbench ${sweep[*]} --repeat $repeat at 2 ranks; $runs plain and $runs planted (--inject-slowdown 0.7)" \
     "runs, alternating; compare --threshold 0.9"
for i in $(seq 1 "$runs"); do
  run "plain-$i"
  run "planted-$i" --inject-slowdown 0.7
done

gate() {  # gate A B: compare's exit status, and its points beyond run-to-run noise (the lines in $out/compare.err)
  local status=0
  "$parbench" compare --threshold 0.9 "$out/$1.json" "$out/$2.json" >/dev/null 2>"$out/compare.err" || status=$?
  echo "$status $(grep -c '^regression:' "$out/compare.err" || true)"
}
passed=0
failed=0
for i in $(seq 1 "$runs"); do
  next=$((i % runs + 1))
  read -r status beyond < <(gate "plain-$i" "plain-$next")
  ((status == 0)) && passed=$((passed + 1))
  printf 'identical  plain-%-3s plain-%-3s exit %s, %s point(s) beyond run-to-run noise\n' "$i" "$next" "$status" "$beyond"
  ((status == 0)) || sed -n 's/^regression: /           /p' "$out/compare.err"
done
for i in $(seq 1 "$runs"); do
  read -r status beyond < <(gate "plain-$i" "planted-$i")
  ((status == 3)) && failed=$((failed + 1))
  printf 'planted    plain-%-3s planted-%-3s exit %s, %s point(s) beyond run-to-run noise\n' "$i" "$i" "$status" "$beyond"
done
echo "identical pairs passing: $passed of $runs (aim: at least $((runs - runs / 20)))"
echo "planted 0.7x pairs failing: $failed of $runs (aim: all)"
((passed >= runs - runs / 20 && failed == runs))
