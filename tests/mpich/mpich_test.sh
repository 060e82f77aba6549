#!/usr/bin/env bash
# parbench built against MPICH, launched by Hydra: info names the launcher and MPICH, every
# collective validates at 3 ranks (an odd count: uneven rings and slices), alltoallv skewed too.
#   mpich_test.sh MPIEXEC PARBENCH
set -uo pipefail
mpiexec=$1
parbench=$2
info=$("$mpiexec" -np 2 "$parbench" info 2>&1) || { echo "FAIL: info: $info"; exit 1; }
grep -q "launcher: mpiexec (MPICH Hydra)" <<<"$info" || { echo "FAIL: info does not name Hydra:"; echo "$info"; exit 1; }
grep -q "MPICH" <<<"$info" || { echo "FAIL: info does not name MPICH:"; echo "$info"; exit 1; }
output=$("$mpiexec" -np 3 "$parbench" all -b 8 -e 64K -f 32 -w 1 -n 2 --check 2>&1)
status=$?
echo "$output" | tail -n 5
[[ $status -eq 0 ]] || { echo "FAIL: all --check under MPICH: exit $status"; echo "$output"; exit 1; }
grep -q "wrong elements: 0 OK" <<<"$output" || { echo "FAIL: no validated summary"; exit 1; }
# alltoallv's skewed blocks too (MPI_Alltoallv with uneven counts, empty blocks at 8 B), dispatch
# and its transpose, the combine.
for skew in hot:1 zipf:1.5; do
  for direction in dispatch combine; do
    output=$("$mpiexec" -np 3 "$parbench" alltoallv --skew "$skew" --direction "$direction" -b 8 -e 64K -f 32 -w 1 \
             -n 2 --check 2>&1)
    status=$?
    [[ $status -eq 0 ]] ||
      { echo "FAIL: alltoallv --skew $skew --direction $direction under MPICH: exit $status"; echo "$output"; exit 1; }
    grep -q "wrong elements: 0 OK" <<<"$output" ||
      { echo "FAIL: alltoallv --skew $skew --direction $direction not validated"; exit 1; }
  done
done
echo "ok: every collective validated under MPICH, alltoallv under hot:1 and zipf:1.5 too, both directions"
