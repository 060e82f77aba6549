#!/usr/bin/env bash
# scripts/cluster.sh's bad input: one line, exit 2, nothing made; a half-made cluster is
# cleaned by the next up; down removes everything. Needs root (skips, exit 77, without).
set -uo pipefail
script=$1
export PARBENCH_CLUSTER_STATE=${PARBENCH_CLUSTER_STATE:-/run/parbench-cluster}
[[ $(id -u) -eq 0 ]] || { echo "SKIP: the emulated cluster needs root (network namespaces)"; exit 77; }
trap '"$script" down >/dev/null 2>&1' EXIT
failures=0

nothing_left() {
  ! ip link show pbbr0 >/dev/null 2>&1 && ! ip netns list | grep -q '^pbhost' && [[ ! -e $PARBENCH_CLUSTER_STATE ]]
}

# expect_usage_error DESCRIPTION COMMAND...: exit 2, exactly one line on stderr, nothing made.
expect_usage_error() {
  local description=$1
  shift
  local err status
  err=$("$@" 2>&1 >/dev/null)
  status=$?
  if [[ $status -ne 2 || $(printf '%s\n' "$err" | wc -l) -ne 1 ]]; then
    echo "FAIL: $description: exit $status, stderr: $err"
    failures=$((failures + 1))
  else
    echo "ok: $description: $err"
  fi
}

"$script" down >/dev/null 2>&1
expect_usage_error "N = 0" "$script" up 0
expect_usage_error "N not a number" "$script" up two
expect_usage_error "bad --inter-bw" "$script" up 2 --inter-bw 10gigs
expect_usage_error "bad --intra-bw" "$script" up 2 --intra-bw fast
expect_usage_error "--intra-bw without a rate" "$script" up 2 --intra-bw
expect_usage_error "--intra-bw below 1 kbit" "$script" up 2 --intra-bw 10bit
expect_usage_error "bad --inter-latency" "$script" up 2 --inter-latency soon
expect_usage_error "not root" setpriv --reuid 65534 --regid 65534 --clear-groups "$script" up 2
# No ip/tc on PATH (and no apt-get to install them): bash and the basics only.
bare=$(mktemp -d)
for tool in bash id awk dirname sed grep wc tr cat; do ln -s "$(command -v "$tool")" "$bare/"; done
expect_usage_error "no ip" env PATH="$bare" "$script" up 2
rm -rf "$bare"
expect_usage_error "run with no cluster" "$script" run -np 2 -- true
expect_usage_error "throttle with no cluster" "$script" throttle pbhost0 --cpu 0.5
nothing_left || { echo "FAIL: bad input left something behind"; failures=$((failures + 1)); }

# A half-made cluster (a bridge and a namespace with the script's names) is cleaned by up.
ip link add pbbr0 type bridge && ip netns add pbhost7
if "$script" up 2 >/dev/null && [[ $("$script" hosts | tr '\n' ' ') == "pbhost0 pbhost1 " ]] &&
   ! ip netns list | grep -q '^pbhost7'; then
  echo "ok: up cleaned a half-made cluster"
else
  echo "FAIL: up did not clean the half-made cluster"; failures=$((failures + 1))
fi
expect_usage_error "already up" "$script" up 2
expect_usage_error "run -np beyond the hosts' slots" "$script" run -np 5 --per-host 2 -- true
"$script" down >/dev/null
nothing_left && echo "ok: down removed everything" || { echo "FAIL: down left something"; failures=$((failures + 1)); }
exit $((failures > 0))
