#!/usr/bin/env bash
# scripts/cluster/cluster.sh's bad input: one line, exit 2, nothing made; a half-made cluster is
# cleaned by the next up; down removes everything. Needs root (skips, exit 77, without).
set -uo pipefail
script=$1
[[ $(id -u) -eq 0 ]] || { echo "SKIP: the emulated cluster needs root (network namespaces)"; exit 77; }
# A cluster instance of this run's own (scripts/cluster/cluster.sh: PARBENCH_CLUSTER_ID), so that another
# suite's cluster on this machine is neither torn down nor counted as left behind.
instance=""
for candidate in $(seq $(($$ % 200 + 1)) 200) $(seq 1 $(($$ % 200))); do
  if [[ ! -e /run/parbench-cluster-$candidate && ! -e /sys/class/net/pbbr$candidate && ! -e /run/netns/pb${candidate}host0 ]]; then
    instance=$candidate
    break
  fi
done
[[ -n $instance ]] || { echo "SKIP: all 200 emulated-cluster instances are in use on this machine"; exit 77; }
export PARBENCH_CLUSTER_ID=$instance
unset PARBENCH_CLUSTER_STATE
state=/run/parbench-cluster-$instance bridge=pbbr$instance netns_prefix=pb${instance}host
copy=""
trap '"$script" down >/dev/null 2>&1; [[ -z $copy ]] || rm -rf "$copy"' EXIT
failures=0

nothing_left() {
  ! ip link show "$bridge" >/dev/null 2>&1 && ! ip netns list | grep -q "^$netns_prefix" && [[ ! -e $state ]]
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
# The unprivileged user may not enter the checkout (a clone in root's home, or in a 0700
# mktemp -d folder): it runs a copy in a folder it can read.
copy=$(mktemp -d)
chmod 755 "$copy" && install -m 755 "$script" "$copy/cluster.sh"
if setpriv --reuid 65534 --regid 65534 --clear-groups test -r "$copy/cluster.sh"; then
  expect_usage_error "not root" setpriv --reuid 65534 --regid 65534 --clear-groups "$copy/cluster.sh" up 2
else
  echo "skipped: not root: user 65534 cannot read $copy/cluster.sh (a folder above $copy is closed to it)"
fi
# No ip/tc on PATH (and no apt-get to install them): bash and the basics only.
bare=$(mktemp -d)
for tool in bash id awk dirname sed grep wc tr cat; do ln -s "$(command -v "$tool")" "$bare/"; done
expect_usage_error "no ip" env PATH="$bare" "$script" up 2
rm -rf "$bare"
expect_usage_error "run with no cluster" "$script" run -np 2 -- true
expect_usage_error "throttle with no cluster" "$script" throttle pbhost0 --cpu 0.5
nothing_left || { echo "FAIL: bad input left something behind"; failures=$((failures + 1)); }

# A half-made cluster (a bridge and a namespace with the script's names) is cleaned by up.
ip link add "$bridge" type bridge && ip netns add "${netns_prefix}7"
if "$script" up 2 >/dev/null && [[ $("$script" hosts | tr '\n' ' ') == "pbhost0 pbhost1 " ]] &&
   ! ip netns list | grep -q "^${netns_prefix}7"; then
  echo "ok: up cleaned a half-made cluster"
else
  echo "FAIL: up did not clean the half-made cluster"; failures=$((failures + 1))
fi
expect_usage_error "already up" "$script" up 2
expect_usage_error "run -np beyond the hosts' slots" "$script" run -np 5 --per-host 2 -- true
"$script" down >/dev/null
nothing_left && echo "ok: down removed everything" || { echo "FAIL: down left something"; failures=$((failures + 1)); }
exit $((failures > 0))
