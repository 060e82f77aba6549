#!/usr/bin/env bash
# A one-node Slurm from Debian's packages (munge, slurmctld and slurmd on this host, talking
# over loopback only), `srun -n 2 parbench allreduce --check` through it, then everything
# stopped in order and removed, also when the test fails; a process of it left behind (a
# slurmstepd) fails the test. Needs root (skips, exit 77, without) and
# installs slurmd, slurmctld, slurm-client and munge when missing.
#   slurm_test.sh PARBENCH
set -uo pipefail
parbench=$1
[[ $(id -u) -eq 0 ]] || { echo "SKIP: a local Slurm needs root (slurmd runs the job steps)"; exit 77; }
packages=(slurmd slurmctld slurm-client munge)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq --no-install-recommends "${missing[@]}" || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; } >/dev/null 2>&1 ||
    { echo "SKIP: could not install ${missing[*]} from the package registry"; exit 77; }
fi

work=$(mktemp -d /tmp/parbench-slurm.XXXXXX)
# Every daemon gets this variable, and so every process they start (slurmstepd included): after
# the teardown none may be left (/proc/PID/environ names them). This shell does not have it.
marker="PARBENCH_SLURM_TEST=$work"
declare -A daemon_pids=()
# slurmd may start slurmstepd with an environment of its own: those not running before are ours too.
stepds_before=" $(pgrep -x slurmstepd | tr '\n' ' ') "

# Processes carrying the marker, and slurmstepd not running before, one "PID COMMAND" a line.
ours() {
  local environ pid
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    tr '\0' '\n' 2>/dev/null <"$environ" | grep -qxF "$marker" && echo "$pid $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")"
  done
  for pid in $(pgrep -x slurmstepd); do
    [[ $stepds_before == *" $pid "* ]] || echo "$pid slurmstepd"
  done
}

# Those still running: a zombie (exited, its parent not yet reaping it) was not left behind.
running() {
  local pid rest
  ours | sort -u | while read -r pid rest; do
    [[ $(ps -o stat= -p "$pid" 2>/dev/null) == Z* || -z $(ps -o stat= -p "$pid" 2>/dev/null) ]] || echo "$pid $rest"
  done
}

# TERM, then up to 15 s for the process to go, then KILL: never an unbounded wait.
stop() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

# In order: the job steps report to slurmd and slurmctld, both authenticate through munged, so
# the steps end first (cancelled if still listed), then slurmd (which owns slurmstepd), then
# slurmctld, then munged.
teardown() {
  if [[ -n ${daemon_pids[slurmctld]:-} ]]; then
    for _ in $(seq 100); do
      [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.1
    done
    [[ -n $(squeue -h -o %i 2>/dev/null) ]] && scancel --full --quiet --user=root 2>/dev/null && sleep 1
  fi
  for daemon in slurmd slurmctld munged; do
    [[ -n ${daemon_pids[$daemon]:-} ]] && stop "${daemon_pids[$daemon]}"
    unset "daemon_pids[$daemon]"
  done
}

cleanup() {
  local status=$? left
  trap - EXIT
  teardown
  # A process that is ending gets 5 s to go; one still running then was left behind.
  for _ in $(seq 50); do
    left=$(running)
    [[ -z $left ]] && break
    sleep 0.1
  done
  if [[ -n $left ]]; then
    echo "FAIL: left running after the teardown:"
    echo "$left"
    while read -r pid _; do kill -KILL "$pid" 2>/dev/null; done <<<"$left"
    status=1
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

node=$(hostname -s)
mkdir -p "$work/state" "$work/spool" "$work/munge"
cat >"$work/slurm.conf" <<CONF
ClusterName=parbench-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF=$work/slurm.conf

# A munged of our own, on its own socket, so a running one is left alone.
env "$marker" munged --socket="$work/munge/munge.socket" --pid-file="$work/munge/munged.pid" \
  --log-file="$work/munge/munged.log" --seed-file="$work/munge/seed" --force --foreground &
daemon_pids[munged]=$!
env "$marker" slurmctld -D -f "$SLURM_CONF" >"$work/slurmctld.out" 2>&1 &
daemon_pids[slurmctld]=$!
env "$marker" slurmd -D -f "$SLURM_CONF" >"$work/slurmd.out" 2>&1 &
daemon_pids[slurmd]=$!

for _ in $(seq 60); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -1)
  [[ $state == idle* || $state == mix* ]] && break
  sleep 1
done
if [[ ${state:-} != idle* && ${state:-} != mix* ]]; then
  echo "FAIL: the one-node Slurm did not come up (node state '${state:-none}')"
  tail -n 20 "$work"/slurmctld.log "$work"/slurmd.log "$work"/*.out "$work/munge/munged.log" 2>/dev/null
  exit 1
fi

output=$(timeout 180 srun -n 2 --mpi=pmix "$parbench" info 2>&1)
status=$?
echo "$output"
if [[ $status -ne 0 ]]; then
  echo "FAIL: srun -n 2 --mpi=pmix parbench info: exit $status"
  tail -n 20 "$work"/slurmd.log
  exit 1
fi
grep -q "launcher: srun (Slurm)" <<<"$output" || { echo "FAIL: info does not say srun started it"; exit 1; }
grep -q "ranks:  2 on 1 host" <<<"$output" || { echo "FAIL: info does not see 2 ranks"; exit 1; }

output=$(timeout 300 srun -n 2 --mpi=pmix "$parbench" allreduce -b 8 -e 1M -f 32 --check 2>&1)
status=$?
echo "$output"
[[ $status -eq 0 ]] || { echo "FAIL: srun -n 2 parbench allreduce --check: exit $status"; exit 1; }
grep -q "wrong elements: 0 OK" <<<"$output" || { echo "FAIL: no validated result"; exit 1; }
# The teardown runs here too, on the way out: a process of this Slurm left after it fails the test.
echo "ok: srun -n 2 parbench allreduce --check through a one-node Slurm"
