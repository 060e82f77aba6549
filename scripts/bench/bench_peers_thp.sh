#!/usr/bin/env bash
# The peer table under the two THP settings hosts commonly have: scripts/bench/compare_peers.py with
# docs/reproducing.md's flags and parbench's default pages (--buffer-pages normal), then with
# --buffer-pages huge, once with transparent huge pages "madvise" (Debian's default) and once
# "always", each judged by the peer-drift rule (--drift).
#
# It switches the host's THP setting, for every process on it, so it needs root and is a
# benchmark script, never a test: the setting it found is put back on every exit (trap), and it
# says so on stderr each time it writes the file.
#
#   scripts/bench/bench_peers_thp.sh --imb PATH/IMB-MPI1 --osu PATH/osu/mpi/collective [--out DIR]
#       [--rounds 8] [--sizes 8,1048576,4194304] [--collectives allreduce,alltoall,reduce]
#       [--settings "madvise always"] [--pages "normal huge"]
# Writes DIR/thp-SETTING-pages-POLICY.json (compare_peers.py's --json) and .md (its table).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
imb="" osu="" out="." rounds=8 sizes=8,1048576,4194304 collectives=allreduce,alltoall,reduce
settings="madvise always" pages="normal huge"
while [[ $# -gt 0 ]]; do
  case $1 in
    --imb) imb=$2; shift 2 ;;
    --osu) osu=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --collectives) collectives=$2; shift 2 ;;
    --settings) settings=$2; shift 2 ;;
    --pages) pages=$2; shift 2 ;;
    *) echo "bench_peers_thp: unknown argument '$1' (see the script's header)" >&2; exit 2 ;;
  esac
done
[[ -x $imb && -x $osu/osu_allreduce ]] ||
  { echo "bench_peers_thp: give --imb (the IMB-MPI1 binary) and --osu (the folder of osu_allreduce...)" >&2; exit 2; }
thp=/sys/kernel/mm/transparent_hugepage
[[ -w $thp/enabled ]] || { echo "bench_peers_thp: $thp/enabled is not writable (run as root)" >&2; exit 2; }
if [[ -r $thp/hugepages-2048kB/enabled ]] && ! grep -q '\[inherit\]' "$thp/hugepages-2048kB/enabled"; then
  echo "bench_peers_thp: $thp/hugepages-2048kB/enabled does not inherit the top-level setting; set it to inherit" >&2
  exit 2
fi
previous=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$thp/enabled")
restore() {
  echo "$previous" > "$thp/enabled"
  echo "bench_peers_thp: THP enabled put back to $previous" >&2
}
trap restore EXIT
trap 'exit 130' INT TERM
mkdir -p "$out"
for setting in $settings; do
  echo "$setting" > "$thp/enabled"
  echo "bench_peers_thp: THP enabled set to $setting for the runs below" >&2
  for policy in $pages; do
    name=$out/thp-$setting-pages-$policy
    status=0
    "$root/scripts/bench/compare_peers.py" --imb "$imb" --osu "$osu" --parbench "$root/build/parbench" \
      --rounds "$rounds" --sizes "$sizes" --collectives "$collectives" --no-imb-placement --drift --markdown \
      --parbench-flags "--buffer-pages $policy" --json "$name.json" > "$name.md" 2> "$name.log" || status=$?
    # 1 is a drift, which is a finding here, not a failure of the script.
    [[ $status -le 1 ]] || { cat "$name.log" >&2; exit "$status"; }
    echo "bench_peers_thp: THP $setting, --buffer-pages $policy: $name.md ($([[ $status -eq 1 ]] && echo drift || echo no drift))" >&2
  done
done
