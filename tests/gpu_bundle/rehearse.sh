#!/usr/bin/env bash
# The GPU bundle rehearsed on this machine, as the lent GPU machine will take it: packed from
# the build (scripts/gpu/gpu_bundle.sh), unpacked by scripts/gpu/gpu_check.sh --rehearse into an empty
# folder of a minimal root (glibc, libstdc++, bash, coreutils and the few tools the check
# calls, python3; no libstdc++, so the bundle's lib/compat stands in), with no build folder, no
# Debian development packages or their libraries, no Open MPI or OpenBLAS of the system, no
# network (a network namespace of its own), and an
# environment of PATH, HOME and TMPDIR alone. The CUDA libraries are there as on that machine:
# cudart and cuBLAS in a CUDA toolkit's folder, NCCL in a Python environment's nvidia/ package,
# for the bundle's env.sh to find. It must run the bundle's CPU parts (info, a collective over
# MPI at 1 and 2 ranks, the GPU test programs up to their "no GPU" skip), and ldd of every
# program must show nothing missing, every packed library the bundle's own copy.
#
#   rehearse.sh SOURCE_ROOT BUILD_DIR
#
# Exits 77 (skipped) where no mount and network namespace can be made, or the build has no
# CUDA plugin.
set -uo pipefail
source_root=$1
build=$2
[[ -f $build/libparbench_cuda.so ]] || { echo "no CUDA plugin in $build: a build without CUDA has no GPU bundle; skipped"; exit 77; }
if ! unshare -m -n --propagation private true 2>/dev/null; then
    echo "cannot make mount and network namespaces here (unshare -m -n): skipped"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT  # the mounts die with the namespace, before this runs
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$source_root/scripts/gpu/gpu_bundle.sh" --no-build --build "$build" --output "$work/bundle" --level 0 || exit 1

# The minimal root: these programs, the libraries they load, and nothing else of /usr.
root=$work/root
mkdir -p "$root"/{usr/bin,usr/lib/x86_64-linux-gnu,usr/lib64,etc,tmp,proc,sys,dev,out,bundle,check,usr/lib/python3.11}
ln -s usr/bin "$root/bin" && ln -s usr/lib "$root/lib" && ln -s usr/lib64 "$root/lib64"
tools=(bash sh env timeout mkdir cat cp mv rm ls ln chmod touch date tee tar xz gzip grep sed awk find head tail cut tr sort
       uniq wc basename dirname readlink realpath mktemp sleep seq uname getconf id true false nproc stat xargs ldd)
for tool in "${tools[@]}"; do cp -L "$(type -P "$tool")" "$root/usr/bin/$tool" || fail "tool $tool missing here"; done
# The system's python3 (a python3 first on PATH may be a wrapper of a version manager).
python=/usr/bin/python3.11
[[ -x $python ]] || { echo "no $python here to put in the root: skipped"; exit 77; }
cp -L "$python" "$root/usr/bin/python3"
# glibc whole, as every machine has it; of the rest only what these programs load.
libraries=$( { for tool in "${tools[@]}"; do ldd "$(type -P "$tool")" 2>/dev/null; done
               ldd "$python"; for module in /usr/lib/python3.11/lib-dynload/*.so; do ldd "$module"; done; } |
             awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
for library in $libraries /lib/x86_64-linux-gnu/lib{c.so.6,m.so.6,dl.so.2,pthread.so.0,rt.so.1,resolv.so.2,util.so.1}; do
    cp -L "$library" "$root/usr/lib/x86_64-linux-gnu/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$root/usr/lib64/"
cp -L /lib64/ld-linux-x86-64.so.2 "$root/usr/lib/x86_64-linux-gnu/"
echo 'root:x:0:0:root:/tmp:/bin/bash' > "$root/etc/passwd"
echo 'root:x:0:' > "$root/etc/group"
echo "127.0.0.1 localhost $(uname -n)" > "$root/etc/hosts"
# What the rehearsal must not offer the bundle: the libraries it carries, from the system.
for soname in libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40 libpmix.so.2 libhwloc.so.15 libopenblas.so.0 \
    libgfortran.so.5 libevent_core-2.1.so.7; do
    [[ -e $root/usr/lib/x86_64-linux-gnu/$soname ]] && fail "the minimal root holds $soname: the rehearsal proves nothing for it"
done

# The CUDA libraries where the lent machine keeps them (bound in below, being large).
cuda=$(dirname "$(readlink -f "$build/libparbench_cuda.so")")
mapfile -t cuda_sonames < <(tar -xJOf "$work/bundle/parbench-gpu.tar.xz" parbench-gpu/cuda_libraries.txt)
declare -A cuda_at=()
for soname in "${cuda_sonames[@]}"; do
    path=$(ldd "$build/libparbench_cuda.so" | awk -v s="$soname" '$1 == s {print $3}')
    [[ -f $path ]] || { echo "$soname: not found here, so the plugin cannot be rehearsed: skipped"; exit 77; }
    if [[ $soname == libnccl.so.* ]]; then
        target=/usr/local/lib/python3.11/dist-packages/nvidia/nccl/lib/$soname  # pip's nvidia-nccl-cu13
    else
        target=/usr/local/cuda-13.0/lib64/$soname  # a CUDA toolkit
    fi
    mkdir -p "$root$(dirname "$target")" && touch "$root$target"
    cuda_at[$target]=$(readlink -f "$path")
done
ln -s cuda-13.0 "$root/usr/local/cuda"
binds=""
for target in "${!cuda_at[@]}"; do binds+="mount --bind -o ro '${cuda_at[$target]}' '$root$target' && "; done

unshare -m -n --propagation private bash -c "
    set -e
    ip link set lo up
    mount -t proc proc '$root/proc'
    mount --rbind /sys '$root/sys'
    mount --rbind /dev '$root/dev'
    mount -t tmpfs tmpfs '$root/dev/shm'
    mount -t tmpfs tmpfs '$root/tmp'
    mount --bind -o ro /usr/lib/python3.11 '$root/usr/lib/python3.11'
    mount --bind -o ro '$source_root/scripts' '$root/check'
    mount --bind -o ro '$work/bundle' '$root/bundle'
    $binds true
    cd '$root/tmp'
    exec chroot '$root' /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp TMPDIR=/tmp \
        bash /check/gpu/gpu_check.sh --bundle /bundle/parbench-gpu.tar.xz --rehearse /out
"
status=$?
echo "--- gpu_check.sh --rehearse exited with status $status"
[[ $status -eq 0 ]] || fail "the rehearsal failed (status $status)"

outputs=$(cd "$root/out" && ls)
[[ $outputs == $'gpu-check-logs.tar.gz\nsummary.txt' ]] || fail "OUTDIR holds [$outputs], not the summary and the archive alone"
summary=$root/out/summary.txt
for expected in setup info collective_mpi_np1 collective_mpi_np2 background_mpi gpu_tests_skip ops_gpu_tests_skip; do
    grep -Eq "^$expected +ok " "$summary" || fail "step $expected did not pass"
done
grep -q '^verdict: 7 passed, 0 failed, 0 skipped' "$summary" || fail "the verdict is not 7 passed"
mkdir "$work/logs" && tar -xzf "$root/out/gpu-check-logs.tar.gz" -C "$work/logs" || fail "the archive does not unpack"
if ((failures > 0)); then
    echo "--- setup.log"
    cat "$work/logs/logs/setup.log"
fi
ldd_log=$work/logs/logs/ldd.txt
[[ $(grep -c '^== ' "$ldd_log") -ge 10 ]] || fail "ldd.txt covers fewer than 10 programs and libraries"
grep -E '^(MISSING|NOT THE BUNDLE)' "$ldd_log" && fail "ldd found a library missing, or not the bundle's"
grep -q 'libmpi.so.40 => /tmp/parbench-gpu-check.*/bundle/parbench-gpu/lib/libmpi.so.40' "$ldd_log" ||
    fail "parbench's libmpi is not the bundle's"

echo "--- bundle: $(du -h "$work/bundle/parbench-gpu.tar.xz" | cut -f1) at xz -0"
if ((failures > 0)); then
    echo "$failures check(s) failed"
    exit 1
fi
echo "the bundle runs its CPU parts in a minimal root: every check passed"
