# The environment of an unpacked parbench GPU bundle (scripts/gpu/gpu_bundle.sh packs this file as
# parbench-gpu/env.sh). For bash:
#
#   source parbench-gpu/env.sh && mpirun -np 1 parbench info
#
# Puts the bundle's programs and libraries first, relocates its Open MPI and PMIx (OPAL_PREFIX,
# PMIX_INSTALL_PREFIX), and finds the CUDA libraries it does not carry (cuda_libraries.txt: cudart,
# cuBLAS, cuBLASLt, NCCL) where this machine has them, in this order: the dynamic linker's own
# search, the CUDA toolkit's folders (CUDA_HOME, CUDA_PATH, /usr/local/cuda*), the nvidia-*
# packages of the Python environments on PATH (site-packages/nvidia/*/lib, where PyTorch's
# wheels put them), and last a bounded search of the file system. libstdc++ and libgcc_s come
# from lib/compat only where the machine's own are missing or older than the bundle needs.
#
# It sets PARBENCH_BUNDLE, PARBENCH_BUNDLE_LIBRARY_PATH (the bundle's own part of
# LD_LIBRARY_PATH), and PARBENCH_BUNDLE_PROBLEMS to one line per problem found (a CUDA library
# missing, a glibc too old); it prints what it found on stderr when PARBENCH_BUNDLE_VERBOSE=1.

PARBENCH_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PARBENCH_BUNDLE
PARBENCH_BUNDLE_PROBLEMS=""
export PATH="$PARBENCH_BUNDLE/bin:$PARBENCH_BUNDLE/mpi/bin:$PATH"
# Open MPI finds its components and help texts below OPAL_PREFIX; PMIx (Debian's is a library
# of its own) below PMIX_INSTALL_PREFIX, its components and help texts named outright, as an
# Open MPI that hands PMIx a prefix of its own would otherwise redirect them.
export OPAL_PREFIX="$PARBENCH_BUNDLE/mpi" PMIX_INSTALL_PREFIX="$PARBENCH_BUNDLE/pmix"
export PMIX_PKGLIBDIR="$PARBENCH_BUNDLE/pmix/lib/pmix" PMIX_PKGDATADIR="$PARBENCH_BUNDLE/pmix/share/pmix"
# Ranks on this host only: without ssh or rsh, Open MPI's default launcher refuses even them.
if [[ -z ${OMPI_MCA_plm:-} ]] && ! command -v ssh > /dev/null && ! command -v rsh > /dev/null; then
    export OMPI_MCA_plm=isolated
fi
export LD_LIBRARY_PATH="$PARBENCH_BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

parbench_bundle_say() { [[ ${PARBENCH_BUNDLE_VERBOSE:-0} == 1 ]] && echo "env.sh: $*" >&2; return 0; }

# The folders a CUDA library may be in, most likely first, one per line.
parbench_bundle_cuda_folders() {
    local home python site
    for home in ${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda /usr/local/cuda-[0-9]*; do
        [[ -d $home ]] && printf '%s\n' "$home/lib64" "$home/lib" "$home/targets/x86_64-linux/lib"
    done
    # Every python3 on PATH (a virtual environment's first), with its site-packages.
    for python in $(type -ap python3); do
        "$python" -c 'import site, sys
for folder in site.getsitepackages() + [site.getusersitepackages()]: print(folder)' 2>/dev/null |
            while read -r site; do
                for folder in "$site"/nvidia/*/lib "$site"/nvidia/lib; do [[ -d $folder ]] && echo "$folder"; done
            done
    done
}

# parbench_bundle_find SONAME: the folder holding it ("system" when the dynamic linker finds it
# unaided); nothing when it is nowhere.
parbench_bundle_find() {
    local soname=$1 folder
    # Whole outputs into grep, never `| grep -q`: under pipefail the writer's SIGPIPE would fail it.
    if grep -q "^[[:space:]]*$soname " <<<"$(ldconfig -p 2>/dev/null)"; then echo system; return; fi
    while read -r folder; do
        [[ -e $folder/$soname ]] && { echo "$folder"; return; }
    done < <(parbench_bundle_cuda_folders)
    # Last: anywhere on this machine's own file systems, for at most 20 s.
    folder=$(timeout 20 find / -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune -o -name "$soname" -print -quit \
        2>/dev/null)
    [[ -n $folder ]] && dirname "$folder"
}

parbench_bundle_setup() {
    local soname folder cuda_path="" needed have
    while read -r soname; do
        [[ -n $soname ]] || continue
        folder=$(parbench_bundle_find "$soname")
        if [[ -z $folder ]]; then
            PARBENCH_BUNDLE_PROBLEMS+="$soname: not found on this machine (install the CUDA toolkit, or pip's nvidia-* package that has it)"$'\n'
            parbench_bundle_say "$soname: NOT FOUND"
            continue
        fi
        parbench_bundle_say "$soname: $folder"
        [[ $folder == system || :$cuda_path: == *:$folder:* ]] || cuda_path+=${cuda_path:+:}$folder
    done < "$PARBENCH_BUNDLE/cuda_libraries.txt"
    [[ -n $cuda_path ]] && LD_LIBRARY_PATH+=:$cuda_path

    # glibc cannot be carried: it must be new enough here.
    needed=$(sed -n 's/^needs there: .*glibc >= \([0-9.]*\).*/\1/p' "$PARBENCH_BUNDLE/MANIFEST.txt")
    have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
    if [[ -n $needed && -n $have && $(printf '%s\n%s\n' "$needed" "$have" | sort -V | head -n 1) != "$needed" ]]; then
        PARBENCH_BUNDLE_PROBLEMS+="glibc $have here, the bundle needs $needed or newer: build parbench on this machine instead"$'\n'
    fi
    # libstdc++ and libgcc_s: the machine's own unless they are missing or too old.
    PARBENCH_BUNDLE_LIBRARY_PATH=$PARBENCH_BUNDLE/lib
    if grep -Eq "lib(stdc\+\+|gcc_s)\.so[^ ]* (=> not found|.*version .* not found)" <<<"$(ldd "$PARBENCH_BUNDLE/bin/parbench" 2>&1)"; then
        LD_LIBRARY_PATH+=:$PARBENCH_BUNDLE/lib/compat
        PARBENCH_BUNDLE_LIBRARY_PATH+=:$PARBENCH_BUNDLE/lib/compat
        parbench_bundle_say "libstdc++.so.6, libgcc_s.so.1: lib/compat (this machine's are missing or too old)"
    fi
    export LD_LIBRARY_PATH PARBENCH_BUNDLE_PROBLEMS PARBENCH_BUNDLE_LIBRARY_PATH
}

parbench_bundle_setup
