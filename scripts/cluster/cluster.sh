#!/usr/bin/env bash
# An emulated cluster on one machine: N "hosts", each a network namespace with its own
# hostname (a UTS namespace) and address, joined by a Linux bridge; tc shapes each host's
# link. mpirun reaches the hosts through an rsh agent that enters the namespaces, so ranks
# on one host share memory and ranks on different hosts talk TCP over the shaped link.
#
#   scripts/cluster/cluster.sh up N [--inter-bw 10gbit] [--intra-bw RATE] [--inter-latency 50us]
#   scripts/cluster/cluster.sh shape HOST --bw RATE          # re-shape one host's link (e.g. make it slow)
#   scripts/cluster/cluster.sh throttle HOST --cpu F         # cap the host's ranks at F cores (e.g. 0.2); --cpu off lifts it
#   scripts/cluster/cluster.sh run -np R [--per-host K] [--map-by slot|node] -- parbench ARGS...
#   scripts/cluster/cluster.sh hosts                          # the emulated hosts, one per line
#   scripts/cluster/cluster.sh down
#
# Rates are tc's: 100mbit, 10gbit, 500kbit (bits per second). --inter-bw shapes every host's
# link in both directions (tbf on each end of its veth). --intra-bw, when given, makes ranks
# on one host talk TCP over the host's own loopback shaped to that rate instead of shared
# memory (which tc cannot shape). --inter-latency needs tc's netem; where the kernel has no
# netem (as on the machine this was written on) the script says so and shapes bandwidth only.
#
# throttle emulates a slower or loaded host: a cgroup (v2 cpu.max, or v1's CFS quota) caps the
# CPU time of every process that `run` starts on that host, together, at F cores (F from 0.01):
# F x 10 ms per 10 ms period, or for F under 0.1 the kernel's 1 ms minimum quota per 1/F ms
# period; runs started afterwards are capped.
#
# Everything lives on 198.18.11.0/24 (RFC 2544's benchmarking range, never routed): the bridge
# has .1 in the root namespace (mpirun listens there), host i has .(10+i). Nothing outside the
# namespaces this script made and loopback is ever addressed. Needs root; installs iproute2.
# State: /run/parbench-cluster (PARBENCH_CLUSTER_STATE to move it).
#
# PARBENCH_CLUSTER_ID=K (1-200) keeps several clusters on one machine apart (two test suites at
# once): K goes into every name the kernel holds machine-wide (bridge pbbrK, veths pbKveth*,
# namespaces pbKhost*, the cgroup, the /run state folder) and the subnet is 198.18.(11+K).0/24;
# the hosts keep their names (pbhost0, ...), which live in their own UTS namespaces. Every
# command of one cluster needs the same PARBENCH_CLUSTER_ID.
set -uo pipefail

usage_error() { echo "cluster.sh: $*" >&2; exit 2; }
instance=${PARBENCH_CLUSTER_ID:-}
[[ -z $instance || ($instance =~ ^[1-9][0-9]{0,2}$ && $instance -le 200) ]] ||
  usage_error "PARBENCH_CLUSTER_ID='$instance': use a number from 1 to 200, or leave it unset"
readonly subnet_prefix=198.18.$((11 + ${instance:-0}))
readonly subnet=$subnet_prefix.0/24
readonly bridge=pbbr${instance:-0}
readonly host_prefix=pbhost           # host names, inside each host's UTS namespace
readonly netns_prefix=pb${instance}host  # network namespace names, machine-wide
readonly veth_prefix=pb${instance}veth
readonly max_hosts=64
readonly cgroup_name=parbench-cluster${instance:+-$instance}
state=${PARBENCH_CLUSTER_STATE:-/run/parbench-cluster${instance:+-$instance}}
root=$(cd "$(dirname "$0")/../.." && pwd)

failure() { echo "cluster.sh: $*" >&2; exit 1; }

# tc rate (e.g. 10gbit) -> bits per second, or empty when it does not parse.
rate_bits() {
  local value=${1,,}
  [[ $value =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$ ]] || return 0
  local scale=1
  case ${BASH_REMATCH[3]} in kbit) scale=1e3 ;; mbit) scale=1e6 ;; gbit) scale=1e9 ;; tbit) scale=1e12 ;; esac
  awk -v n="${BASH_REMATCH[1]}" -v s="$scale" 'BEGIN { v = n * s; if (v >= 1000) printf "%.0f\n", v }'
}

valid_latency() { [[ ${1,,} =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]]; }

need_root() { [[ $(id -u) -eq 0 ]] || usage_error "needs root (network namespaces, bridge, tc); run it as root or with sudo"; }

# iproute2 gives ip and tc; installed like setup.sh installs its packages.
need_ip() {
  if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    if command -v apt-get >/dev/null; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 >/dev/null 2>&1 ||
        { DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 >/dev/null 2>&1; }
    fi
  fi
  command -v ip >/dev/null && command -v tc >/dev/null ||
    usage_error "no 'ip'/'tc' (iproute2) and it could not be installed; install iproute2 and retry"
  command -v nsenter >/dev/null && command -v unshare >/dev/null ||
    usage_error "no nsenter/unshare (util-linux); install util-linux and retry"
}

host_name() { echo "$host_prefix$1"; }
netns_name() { echo "$netns_prefix$1"; }
host_address() { echo "$subnet_prefix.$((10 + $1))"; }

# tbf's bucket must hold at least one rate-tick of data (rate / HZ, HZ up to 1000) and a
# 64 KiB GSO segment, else the shaper caps below the rate.
tbf_burst_bytes() { awk -v b="$1" 'BEGIN { v = b / 8 / 250; if (v < 262144) v = 262144; printf "%.0f\n", v }'; }

# Egress shaping of one device (inside namespace $1, or the root namespace when empty).
shape_device() {
  local namespace=$1 device=$2 rate=$3 latency=$4
  local bits burst exec=()
  bits=$(rate_bits "$rate")
  burst=$(tbf_burst_bytes "$bits")
  [[ -n $namespace ]] && exec=(ip netns exec "$namespace")
  "${exec[@]}" tc qdisc del dev "$device" root >/dev/null 2>&1
  if [[ -n $latency ]]; then
    "${exec[@]}" tc qdisc add dev "$device" root handle 1: netem delay "$latency" &&
      "${exec[@]}" tc qdisc add dev "$device" parent 1: handle 2: tbf rate "$rate" burst "$burst" latency 100ms
  else
    "${exec[@]}" tc qdisc add dev "$device" root tbf rate "$rate" burst "$burst" latency 100ms
  fi
}

netem_available() {
  local probe=pb${instance}netemprobe
  ip link add "$probe" type dummy 2>/dev/null || return 1
  local ok=1
  tc qdisc add dev "$probe" root netem delay 1ms >/dev/null 2>&1 && ok=0
  ip link del "$probe" 2>/dev/null
  return $ok
}

# The cgroup folder under which throttle makes one cgroup per host, and its kind (v2 or v1);
# nothing when this machine has no CPU controller to cap with.
cgroup_parent() {
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
    echo "v2 /sys/fs/cgroup/$cgroup_name"
  elif [[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
    echo "v1 /sys/fs/cgroup/cpu/$cgroup_name"
  fi
}

# Removes the hosts' CPU caps: ends what runs in them (only processes run put there), then
# the cgroups, whichever cgroup version made them.
remove_cgroups() {
  local parent group pid tries
  for parent in /sys/fs/cgroup/$cgroup_name /sys/fs/cgroup/cpu/$cgroup_name; do
    [[ -d $parent ]] || continue
    for group in "$parent"/*/; do
      [[ -f $group/cgroup.procs ]] || continue
      for tries in $(seq 50); do
        for pid in $(cat "$group/cgroup.procs" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        rmdir "$group" 2>/dev/null && break
        sleep 0.1
      done
    done
    rmdir "$parent" 2>/dev/null
  done
}

# Removes everything this script can have made, whether or not `up` finished.
teardown() {
  local name
  for name in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$netns_prefix[0-9]+$"); do
    # Ranks left over from an aborted run would keep the namespace alive.
    for pid in $(ip netns pids "$name" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$name" 2>/dev/null
  done
  remove_cgroups
  for name in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^$veth_prefix[0-9]+$"); do
    ip link del "$name" 2>/dev/null
  done
  ip link del "$bridge" 2>/dev/null
  if [[ -d $state/uts ]]; then
    for name in "$state"/uts/*; do
      [[ -e $name ]] || continue
      umount "$name" 2>/dev/null
      rm -f "$name"
    done
    umount "$state/uts" 2>/dev/null
  fi
  rm -rf "$state"
}

half_made() {
  [[ -d $state ]] || ip link show "$bridge" >/dev/null 2>&1 ||
    ip netns list 2>/dev/null | grep -qE "^$netns_prefix[0-9]+( |$)" ||
    [[ -d /sys/fs/cgroup/$cgroup_name || -d /sys/fs/cgroup/cpu/$cgroup_name ]]
}

cmd_up() {
  local count="" inter_bw=10gbit intra_bw="" latency=""
  while (($#)); do
    case $1 in
      --inter-bw) [[ $# -ge 2 ]] || usage_error "--inter-bw needs a rate, e.g. --inter-bw 10gbit"; inter_bw=$2; shift 2 ;;
      --intra-bw) [[ $# -ge 2 ]] || usage_error "--intra-bw needs a rate, e.g. --intra-bw 100gbit"; intra_bw=$2; shift 2 ;;
      --inter-latency) [[ $# -ge 2 ]] || usage_error "--inter-latency needs a delay, e.g. --inter-latency 50us"; latency=$2; shift 2 ;;
      -*) usage_error "up: unknown option '$1'; use --inter-bw, --intra-bw, --inter-latency" ;;
      *) [[ -z $count ]] || usage_error "up: one host count only (got '$count' and '$1')"; count=$1; shift ;;
    esac
  done
  [[ $count =~ ^[0-9]+$ ]] || usage_error "up: the host count N must be a whole number, e.g. 'up 2' (got '${count}')"
  ((count >= 1 && count <= max_hosts)) || usage_error "up: N must be 1..$max_hosts (got $count)"
  [[ -n $(rate_bits "$inter_bw") ]] || usage_error "--inter-bw '$inter_bw': not a rate; use tc's units, e.g. 10gbit, 500mbit"
  [[ -z $intra_bw || -n $(rate_bits "$intra_bw") ]] ||
    usage_error "--intra-bw '$intra_bw': not a rate; use tc's units, e.g. 100gbit"
  [[ -z $latency ]] || valid_latency "$latency" || usage_error "--inter-latency '$latency': not a delay; use e.g. 50us or 1ms"
  need_root
  need_ip
  if [[ -f $state/up ]]; then
    usage_error "a cluster is already up ($(wc -l <"$state/hosts") hosts); run 'scripts/cluster/cluster.sh down' first"
  fi
  half_made && teardown  # a half-made cluster from an interrupted up or a killed test

  if [[ -n $latency ]] && ! netem_available; then
    echo "cluster.sh: note: this kernel has no netem (tc qdisc netem), so --inter-latency $latency is not emulated; links are shaped in bandwidth only" >&2
    latency=""
  fi

  trap 'teardown; exit 1' INT TERM
  if ! build_cluster "$count" "$inter_bw" "$intra_bw" "$latency"; then
    teardown
    failure "up failed (see the message above); nothing is left behind"
  fi
  trap - INT TERM
  echo "cluster.sh: $count hosts up ($(tr '\n' ' ' <"$state/hosts" | sed 's/ $//')) on $subnet, links shaped to $inter_bw${latency:+ + $latency}${intra_bw:+, intra-host $intra_bw over loopback TCP}"
}

build_cluster() {
  local count=$1 inter_bw=$2 intra_bw=$3 latency=$4 i name netns
  mkdir -p "$state/uts" || return 1
  # The UTS namespaces are kept alive by bind mounts, which need a private mount to live on.
  mount --bind "$state/uts" "$state/uts" && mount --make-private "$state/uts" || return 1
  ip link add "$bridge" type bridge || return 1
  ip addr add "$subnet_prefix.1/24" dev "$bridge" || return 1
  ip link set "$bridge" up || return 1
  : >"$state/hosts"
  : >"$state/hostfile"
  for ((i = 0; i < count; ++i)); do
    name=$(host_name "$i")
    netns=$(netns_name "$i")
    ip netns add "$netns" || return 1
    ip link add "$veth_prefix$i" type veth peer name eth0 netns "$netns" || return 1
    ip link set "$veth_prefix$i" master "$bridge" up || return 1
    ip netns exec "$netns" ip link set lo up || return 1
    ip netns exec "$netns" ip addr add "$(host_address "$i")/24" dev eth0 || return 1
    ip netns exec "$netns" ip link set eth0 up || return 1
    # The host's link in both directions: its sends (eth0 egress) and its receives (the
    # bridge port's egress toward it).
    shape_device "$netns" eth0 "$inter_bw" "$latency" || return 1
    shape_device "" "$veth_prefix$i" "$inter_bw" "$latency" || return 1
    [[ -z $intra_bw ]] || shape_device "$netns" lo "$intra_bw" "" || return 1
    touch "$state/uts/$name" || return 1
    unshare --uts="$state/uts/$name" hostname "$name" || return 1
    echo "$name" >>"$state/hosts"
    echo "$name $(host_address "$i")" >>"$state/addresses"
  done
  cat >"$state/rsh-agent" <<EOF || return 1
#!/bin/sh
# mpirun's rsh agent: runs the orted command inside the emulated host's namespaces.
host=\$1; shift
netns=$netns_prefix\${host#$host_prefix}
[ -e /run/netns/\$netns ] && [ -e $state/uts/\$host ] || { echo "rsh-agent: no emulated host '\$host'" >&2; exit 1; }
# A throttled host: the daemon, and so every rank it starts, runs inside the host's CPU cap.
if [ -f $state/cpu-cap/\$host ]; then
  echo \$\$ >"\$(cat $state/cpu-cap/\$host)/cgroup.procs" || { echo "rsh-agent: could not enter \$host's CPU cap" >&2; exit 1; }
fi
exec nsenter --net=/run/netns/\$netns --uts=$state/uts/\$host -- /bin/sh -c "\$*"
EOF
  chmod +x "$state/rsh-agent" || return 1
  printf 'inter_bw=%s\nintra_bw=%s\nlatency=%s\n' "$inter_bw" "$intra_bw" "$latency" >"$state/shaping" || return 1
  ! command -v ping >/dev/null || ip netns exec "$(netns_name 0)" ping -c1 -W2 "$subnet_prefix.1" >/dev/null 2>&1 || {
    echo "cluster.sh: $(host_name 0) cannot reach the bridge at $subnet_prefix.1" >&2
    return 1
  }
  touch "$state/up"
}

need_up() { [[ -f $state/up ]] || usage_error "no cluster is up; run 'scripts/cluster/cluster.sh up N' first"; }

# need_host COMMAND HOST: HOST must be one of the cluster's emulated hosts; COMMAND names the refusal.
need_host() {
  grep -qx "$2" "$state/hosts" || usage_error "$1: '$2' is not an emulated host; use one of: $(tr '\n' ' ' <"$state/hosts")"
}

cmd_throttle() {
  need_root
  need_up
  local host=${1:-} cpu=""
  shift || true
  while (($#)); do
    case $1 in
      --cpu) [[ $# -ge 2 ]] || usage_error "throttle: --cpu needs a number of cores, e.g. --cpu 0.2, or off"; cpu=$2; shift 2 ;;
      *) usage_error "throttle: unknown option '$1'; use: throttle HOST --cpu CORES|off" ;;
    esac
  done
  need_host throttle "$host"
  local quota_us="" period_us=""
  if [[ $cpu != off ]]; then
    # A 10 ms period keeps the cap smooth next to millisecond steps; below 0.1 cores the quota
    # would fall under the kernel's 1 ms minimum, so the period grows instead (100 ms at 0.01).
    read -r quota_us period_us <<<"$(awk -v c="$cpu" 'BEGIN {
      if (c ~ /^[0-9]+(\.[0-9]+)?$/ && c >= 0.01 && c <= 1024) {
        p = 10000; if (c * p < 1000) p = int(1000 / c + 0.5); printf "%d %d\n", c * p, p } }')"
    [[ -n $quota_us ]] || usage_error "throttle: --cpu '$cpu': give cores as a number from 0.01 up (e.g. 0.2), or off"
  fi
  local kind parent
  read -r kind parent <<<"$(cgroup_parent)"
  [[ -n $kind ]] ||
    usage_error "throttle: this machine has no cgroup CPU controller (cgroup v2 cpu.max or v1 cpu.cfs_quota_us) to cap a host with"
  local group=$parent/$host
  if [[ $cpu == off ]]; then
    rm -f "$state/cpu-cap/$host"
    [[ ! -d $group ]] || rmdir "$group" 2>/dev/null ||
      failure "throttle: $host's cgroup still has processes; stop its run first"
    echo "cluster.sh: $host's CPU cap lifted"
    return 0
  fi
  mkdir -p "$state/cpu-cap" || failure "throttle: cannot write $state/cpu-cap"
  if [[ $kind == v2 ]]; then
    # The cpu controller must be enabled on the way down to the host's cgroup.
    { grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control; } &&
      mkdir -p "$group" && { grep -qw cpu "$parent/cgroup.subtree_control" || echo +cpu >"$parent/cgroup.subtree_control"; } &&
      echo "$quota_us $period_us" >"$group/cpu.max" ||
      failure "throttle: could not make the CPU cap $group (cgroup v2)"
  else
    mkdir -p "$group" && echo "$period_us" >"$group/cpu.cfs_period_us" && echo "$quota_us" >"$group/cpu.cfs_quota_us" ||
      failure "throttle: could not make the CPU cap $group (cgroup v1)"
  fi
  echo "$group" >"$state/cpu-cap/$host" || failure "throttle: cannot write $state/cpu-cap/$host"
  echo "cluster.sh: $host's ranks capped at $cpu cores together (cgroup $kind, ${quota_us} us per ${period_us} us)"
}

cmd_shape() {
  need_root
  need_up
  local host=${1:-} bw=""
  shift || true
  while (($#)); do
    case $1 in
      --bw) [[ $# -ge 2 ]] || usage_error "shape: --bw needs a rate"; bw=$2; shift 2 ;;
      *) usage_error "shape: unknown option '$1'; use: shape HOST --bw RATE" ;;
    esac
  done
  need_host shape "$host"
  [[ -n $(rate_bits "$bw") ]] || usage_error "shape: --bw '$bw': not a rate; use tc's units, e.g. 1gbit"
  local index=${host#"$host_prefix"} latency
  latency=$(sed -n 's/^latency=//p' "$state/shaping")
  shape_device "$(netns_name "$index")" eth0 "$bw" "$latency" && shape_device "" "$veth_prefix$index" "$bw" "$latency" ||
    failure "shape: tc failed for $host"
  echo "cluster.sh: $host's link shaped to $bw"
}

cmd_run() {
  need_up
  local ranks="" per_host="" map_by=slot
  while (($#)); do
    case $1 in
      -np | -n) [[ $# -ge 2 ]] || usage_error "run: -np needs a rank count"; ranks=$2; shift 2 ;;
      --per-host) [[ $# -ge 2 ]] || usage_error "run: --per-host needs a count"; per_host=$2; shift 2 ;;
      --map-by) [[ $# -ge 2 ]] || usage_error "run: --map-by needs slot or node"; map_by=$2; shift 2 ;;
      --) shift; break ;;
      *) usage_error "run: unknown option '$1'; use: run -np R [--per-host K] [--map-by slot|node] -- COMMAND..." ;;
    esac
  done
  (($#)) || usage_error "run: no command after --; e.g. run -np 4 -- parbench info"
  [[ $ranks =~ ^[0-9]+$ ]] && ((ranks >= 1)) || usage_error "run: -np must be a rank count of 1 or more (got '$ranks')"
  local hosts
  hosts=$(wc -l <"$state/hosts")
  [[ -n $per_host ]] || per_host=$(((ranks + hosts - 1) / hosts))
  [[ $per_host =~ ^[0-9]+$ ]] && ((per_host >= 1)) || usage_error "run: --per-host must be 1 or more (got '$per_host')"
  ((ranks <= per_host * hosts)) ||
    usage_error "run: -np $ranks does not fit $hosts hosts x --per-host $per_host; raise --per-host or bring up more hosts"
  [[ $map_by == slot || $map_by == node ]] || usage_error "run: --map-by '$map_by': use slot (pack hosts) or node (round robin)"
  local hostfile=$state/hostfile.$$
  sed "s/\$/ slots=$per_host/" "$state/hosts" >"$hostfile"

  local program=$1
  shift
  [[ $program == parbench ]] && program=${PARBENCH_BUILD_DIR:-$root/build}/parbench
  local intra_bw btl=self,vader,tcp
  intra_bw=$(sed -n 's/^intra_bw=//p' "$state/shaping")
  [[ -z $intra_bw ]] || btl=self,tcp  # intra-host traffic through the shaped loopback
  # --bind-to none: each host's daemon would pin its ranks from core 0 up, not knowing that the
  # other emulated hosts share the same cores.
  local mpirun=(mpirun --allow-run-as-root --hostfile "$hostfile" -np "$ranks" --map-by "$map_by" --bind-to none
                --mca plm_rsh_agent "$state/rsh-agent" --mca plm_rsh_no_tree_spawn 1 --mca routed direct
                --mca oob_tcp_if_include "$subnet" --mca btl_tcp_if_include "$subnet" --mca btl "$btl"
                --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}")
  "${mpirun[@]}" "$program" "$@" </dev/null
  local status=$?
  rm -f "$hostfile"
  return $status
}

cmd_down() {
  need_root
  need_ip
  teardown
  echo "cluster.sh: down"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  shape) shift; cmd_shape "$@" ;;
  throttle) shift; cmd_throttle "$@" ;;
  run) shift; cmd_run "$@"; exit $? ;;
  hosts) need_up; cat "$state/hosts" ;;
  down) cmd_down ;;
  -h | --help | help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
  *) usage_error "use: up N [--inter-bw RATE] [--intra-bw RATE] [--inter-latency DELAY] | shape HOST --bw RATE | throttle HOST --cpu CORES|off | run -np R [--per-host K] -- COMMAND... | hosts | down" ;;
esac
