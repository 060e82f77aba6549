#!/usr/bin/env bash
# Packs parbench's GPU path into one compressed file that runs on an x86-64 Linux machine with
# NVIDIA GPUs but without this project's build: no compiler, no Debian development packages,
# no network. scripts/gpu/gpu_check.sh --bundle takes it there (docs/gpus.md, "The one-GPU check").
#
#   scripts/gpu/gpu_bundle.sh [--build DIR] [--output DIR] [--no-build] [--level 0-9]
#
#   --build DIR   the CUDA build to pack (default build/; configured and built by
#                 scripts/setup.sh with PARBENCH_CUDA=ON when it is not there yet)
#   --output DIR  where the bundle goes (default gpu-bundle/, ignored by git)
#   --no-build    pack what DIR already holds (the rehearsal test packs the build CTest ran)
#   --level N     xz's compression level (default 6; 0 packs fastest)
#
# It writes OUTPUT/parbench-gpu.tar.xz and, beside it, OUTPUT/MANIFEST.txt (also inside).
# Inside, under parbench-gpu/:
#   bin/       parbench and its CUDA plugin, the GPU test programs, the NVTX demo and recorder
#   lib/       every shared library they and Open MPI need beyond glibc and the CUDA libraries
#   lib/compat libstdc++ and libgcc_s, used only where the machine's own are missing or older
#   mpi/, pmix/ Open MPI's and PMIx's components and help texts, relocated by OPAL_PREFIX and
#              PMIX_INSTALL_PREFIX (Open MPI components that need libraries left out, such as UCX,
#              libfabric or verbs, are left out too; the MANIFEST names them)
#   configs/, tests/, scripts/  the model configs and the check's own files
#   env.sh     sets the environment up, and finds cudart, cuBLAS(Lt) and NCCL on the machine
#              (the CUDA toolkit's folders or a Python environment's nvidia-* packages)
# The CUDA libraries are not packed: they are hundreds of MB, and the machine that has a GPU
# has them; cuda_libraries.txt lists the ones to find.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$root/build
output=$root/gpu-bundle
compile=true
level=6
while [[ $# -gt 0 ]]; do
    case $1 in
        -h|--help) sed -n '2,/^# has them;/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --build) build=$(realpath -m "$2"); shift 2 ;;
        --output) output=$(realpath -m "$2"); shift 2 ;;
        --no-build) compile=false; shift ;;
        --level) level=$2; shift 2 ;;
        *) echo "gpu_bundle: unknown argument '$1'; see the usage at the top of scripts/gpu/gpu_bundle.sh" >&2; exit 2 ;;
    esac
done
[[ $level =~ ^[0-9]$ ]] || { echo "gpu_bundle: --level $level: give 0 to 9" >&2; exit 2; }
die() { echo "gpu_bundle: $*" >&2; exit 1; }

targets=(parbench parbench_gpu_tests parbench_ops_gpu_tests parbench_nvtx_nesting_demo parbench_nvtx_recorder)
if [[ $compile == true ]]; then
    if [[ ! -f $build/CMakeCache.txt ]]; then
        echo "configuring and building $build with CUDA (scripts/setup.sh)"
        PARBENCH_CUDA=ON PARBENCH_BUILD_DIR=$build PARBENCH_BUILD_TARGETS="${targets[*]}" "$root/scripts/setup.sh"
    else
        echo "building ${targets[*]} in $build"
        cmake --build "$build" -j"$(nproc)" "${targets[@]/#/--target=}" > "$build/gpu-bundle-build.log" 2>&1 ||
            { tail -n 40 "$build/gpu-bundle-build.log"; die "the build failed (whole log: $build/gpu-bundle-build.log)"; }
    fi
fi

# What is packed from the build, as bundle path <- build path.
declare -A from_build=(
    [bin/parbench]=parbench
    [bin/libparbench_cuda.so]=libparbench_cuda.so
    [bin/parbench_gpu_tests]=tests/gpu/parbench_gpu_tests
    [bin/parbench_ops_gpu_tests]=tests/ops/parbench_ops_gpu_tests
    [bin/parbench_nvtx_nesting_demo]=tests/nvtx/parbench_nvtx_nesting_demo
    [lib/libparbench_nvtx_recorder.so]=tests/nvtx/libparbench_nvtx_recorder.so
)
for file in "${from_build[@]}"; do
    [[ -f $build/$file ]] || die "$build/$file is missing: is $build a CUDA build (PARBENCH_CUDA=ON) with tests on? (run without --no-build to build it)"
done
architectures=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")
[[ ${architectures:-default} == *90* || ${architectures:-} == native ]] ||
    die "$build compiles CUDA for '$architectures', which lacks sm_90 (H100/H200); reconfigure it without CMAKE_CUDA_ARCHITECTURES"

mkdir -p "$output"
stage=$output/stage
rm -rf "$stage"
bundle=$stage/parbench-gpu
mkdir -p "$bundle"/{bin,lib/compat,configs/models,scripts/gpu,tests/nvtx,tests/train}
for target in "${!from_build[@]}"; do cp -p "$build/${from_build[$target]}" "$bundle/$target"; done
cp -p "$root"/configs/models/*.json "$bundle/configs/models/"
cp -p "$root/tests/nvtx/check_nvtx_ranges.py" "$bundle/tests/nvtx/"
cp -p "$root/tests/train/llama-moe-sigmoid.json" "$bundle/tests/train/"
cp -p "$root/scripts/gpu/gpu_check.sh" "$root/scripts/gpu/gpu_check_reports.py" "$bundle/scripts/gpu/"
cp -p "$root/scripts/gpu/gpu_bundle_env.sh" "$bundle/env.sh"

# Open MPI: its launcher and daemon, its components and help texts, laid out below mpi/ as
# OPAL_PREFIX expects them (Debian's paths below /usr); PMIx's likewise below pmix/.
ompi_path() { ompi_info --path "$1" --parsable 2>/dev/null | sed -n "s/^path:$1://p"; }
ompi_prefix=$(ompi_path prefix)
ompi_pkglibdir=$(ompi_path pkglibdir)
ompi_pkgdatadir=$(ompi_path pkgdatadir)
[[ -d $ompi_pkglibdir && -d $ompi_pkgdatadir ]] || die "cannot find Open MPI's components (ompi_info --path pkglibdir): is openmpi-bin installed?"
mpi=$bundle/mpi
components=$mpi${ompi_pkglibdir#"$ompi_prefix"}
mkdir -p "$mpi/bin" "$components" "$mpi${ompi_pkgdatadir#"$ompi_prefix"}"
cp -pL "$(command -v orterun)" "$(command -v orted)" "$mpi/bin/"
ln -s orterun "$mpi/bin/mpirun"
cp -pr "$ompi_pkgdatadir"/. "$mpi${ompi_pkgdatadir#"$ompi_prefix"}/"
# Debian's Open MPI uses an external PMIx, installed below its own prefix.
pmix_prefix=$(ompi_info | sed -n "s/.*'--with-pmix=\([^']*\)'.*/\1/p")
[[ -d $pmix_prefix/lib/pmix ]] || die "cannot find PMIx's components (Open MPI was configured --with-pmix=$pmix_prefix)"
mkdir -p "$bundle/pmix/lib/pmix" "$bundle/pmix/share"
cp -pr "$pmix_prefix/share/." "$bundle/pmix/share/"

# Libraries: glibc's own and the CUDA libraries stay on the machine; libstdc++ and libgcc_s go
# to lib/compat; everything else a packed program or component needs goes to lib/.
glibc_re='^(linux-vdso\.so|ld-linux-x86-64\.so|lib(c|m|dl|pthread|rt|resolv|util|anl|mvec)\.so)'
cuda_re='^lib(cuda|cudart|cublas|cublasLt|nccl|nvidia-[a-z-]+|nvrtc|nvJitLink)\.so'
compat_re='^lib(stdc\+\+|gcc_s)\.so'
# Open MPI's and PMIx's own libraries, which a component may bring in with it.
own_re='^lib(mca_common_[a-z_]+|mpi[a-z_]*|open-(pal|rte)|pmix)\.so'
needs() { ldd "$1" | awk '$2 == "=>" { print $1, ($3 == "not" ? "not" : $3) }'; }  # FILE: "soname path"...
declare -A carried=()  # soname -> its path here
declare -A cuda=()     # sonames left to the machine
carry_needs_of() {  # FILE: records what it loads; a library missing here is an error
    local soname path
    while read -r soname path; do
        [[ $soname =~ $glibc_re ]] && continue
        if [[ $soname =~ $cuda_re ]]; then cuda[$soname]=1; continue; fi
        [[ $path == not ]] && die "$1 needs $soname, which is not found here"
        carried[$soname]=$path
    done < <(needs "$1")
}
# PMIx is how every rank mpirun starts reaches it: it is packed with all it needs (libmunge).
pmix_library=$(needs "$ompi_pkglibdir/mca_pmix_ext3x.so" | awk '$1 == "libpmix.so.2" {print $2}')
pmix_library=$(readlink -f "$pmix_library")
[[ -f $pmix_library ]] || die "cannot find the PMIx library Open MPI's mca_pmix_ext3x.so loads"
carried[libpmix.so.2]=$pmix_library
for file in "$bundle"/bin/* "$bundle"/lib/*.so "$mpi"/bin/orterun "$mpi"/bin/orted "$pmix_library"; do
    [[ -L $file ]] || carry_needs_of "$file"
done
# A component is packed when it needs nothing beyond what is packed already, glibc, and Open
# MPI's or PMIx's own libraries: the others (UCX, libfabric, verbs, PSM, Java, netlink) serve
# fabrics and features that runs on one host's shared memory never use.
left_out=()
first_foreign_need() {  # FILE: the first library it needs that the rule above keeps out
    local soname path
    while read -r soname path; do
        [[ $soname =~ $glibc_re || $soname =~ $compat_re || $soname =~ $own_re || -n ${carried[$soname]:-} ]] && continue
        echo "$soname"
        return
    done < <(needs "$1")
}
for component in "$ompi_pkglibdir"/*.so "$pmix_prefix"/lib/pmix/*.so; do
    foreign=$(first_foreign_need "$component")
    if [[ -n $foreign ]]; then
        left_out+=("$(basename "$component") (needs $foreign)")
        continue
    fi
    carry_needs_of "$component"
    if [[ $component == "$ompi_pkglibdir"/* ]]; then cp -p "$component" "$components/"; else cp -p "$component" "$bundle/pmix/lib/pmix/"; fi
done
for soname in "${!carried[@]}"; do
    destination=$bundle/lib
    [[ $soname =~ $compat_re ]] && destination=$bundle/lib/compat
    cp -pL "${carried[$soname]}" "$destination/$soname"
done
printf '%s\n' "${!cuda[@]}" | sort > "$bundle/cuda_libraries.txt"
[[ -s $bundle/cuda_libraries.txt ]] || die "no packed program needs a CUDA library: is $build a CUDA build?"

# The newest glibc and libstdc++ symbol versions the packed files ask for: the machine must
# have at least these (env.sh checks glibc; libstdc++ falls back to lib/compat's, which asks
# for a glibc of its own).
newest_version() {  # PREFIX FOLDER [EXCLUDED]: the highest PREFIX_x.y.z an ELF file there references
    local file
    while IFS= read -r -d '' file; do
        if [[ $(head -c 4 "$file") == $'\x7fELF' ]]; then objdump -T "$file" 2>/dev/null; fi
    done < <(find "$2" -type f ! -path "${3:-/nothing}/*" -print0) | grep -o "$1_[0-9.]*[0-9]" | sed "s/^$1_//" | sort -V |
        tail -n 1
}
glibc_needed=$(newest_version GLIBC "$bundle" "$bundle/lib/compat")
glibcxx_needed=$(newest_version GLIBCXX "$bundle" "$bundle/lib/compat")
compat_glibc_needed=$(newest_version GLIBC "$bundle/lib/compat")

header_define() {  # FILE MACRO: the number a #define gives MACRO
    sed -n "s/^#define $2  *\([0-9][0-9]*\).*/\1/p" "$1" | head -n 1
}
nvcc=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake | head -n 1)
cuda_include=$(dirname "$(dirname "$nvcc")")/include
cudart=$(header_define "$cuda_include/cuda_runtime_api.h" CUDART_VERSION)
nccl=$(printf '%s.%s.%s' "$(header_define "$cuda_include/nccl.h" NCCL_MAJOR)" "$(header_define "$cuda_include/nccl.h" NCCL_MINOR)" \
    "$(header_define "$cuda_include/nccl.h" NCCL_PATCH)")
cublas=$(printf '%s.%s.%s' "$(header_define "$cuda_include/cublas_api.h" CUBLAS_VER_MAJOR)" \
    "$(header_define "$cuda_include/cublas_api.h" CUBLAS_VER_MINOR)" "$(header_define "$cuda_include/cublas_api.h" CUBLAS_VER_PATCH)")
{
    echo "parbench GPU bundle (scripts/gpu/gpu_bundle.sh)"
    echo "revision:       $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "packed:         $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -m), from $build"
    echo "compiled by:    nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') for ${architectures:-default}"
    echo "built against:  CUDA runtime $((cudart / 1000)).$((cudart % 1000 / 10)), cuBLAS $cublas, NCCL $nccl"
    echo "needs there:    x86-64 Linux with glibc >= $glibc_needed and an NVIDIA driver for CUDA $((cudart / 1000)).$((cudart % 1000 / 10)) or newer;"
    echo "                libstdc++ with GLIBCXX_$glibcxx_needed (else lib/compat's is used, which needs glibc >= $compat_glibc_needed)"
    echo "found there:    $(tr '\n' ' ' < "$bundle/cuda_libraries.txt")(env.sh looks for them)"
    echo "left out:       ${left_out[*]:-nothing}"
    echo "files:"
    (cd "$stage" && find parbench-gpu \( -type f -o -type l \) -printf '%10s  %p\n' | sort -k2)
} > "$bundle/MANIFEST.txt"
cp "$bundle/MANIFEST.txt" "$output/MANIFEST.txt"

archive=$output/parbench-gpu.tar.xz
tar -C "$stage" -cf - parbench-gpu | xz -"$level" -T2 > "$archive.tmp"
mv "$archive.tmp" "$archive"
rm -rf "$stage"
echo "bundle: $archive ($(du -h "$archive" | cut -f1); $output/MANIFEST.txt lists what it holds)"
