#!/usr/bin/env bash
# A one-node Slurm from Debian's packages (munge, slurmctld and slurmd on this host, talking
# over loopback only), `srun -n 2 parbench allreduce --check` through it, then everything
# stopped and removed, also when the test fails. Needs root (skips, exit 77, without) and
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
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$work"
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
munged --socket="$work/munge/munge.socket" --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
  --seed-file="$work/munge/seed" --force --foreground &
pids+=($!)
slurmctld -D -f "$SLURM_CONF" >"$work/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$work/slurmd.out" 2>&1 &
pids+=($!)

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
echo "ok: srun -n 2 parbench allreduce --check through a one-node Slurm"
