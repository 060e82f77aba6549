/* LD_PRELOAD shim for scripts/bench/compare_peers.py: logs where MPI_Alloc_mem's memory lands
 * (IMB-MPI1 allocates its send and receive buffers with it), so that parbench can be run
 * with the same relative placement of its two buffers (--buffer-offsets). One line per
 * call on stderr: "alloc-spy rank R size S offset O", O the address modulo 4096.
 * Build: mpicc -shared -fPIC -O2 mpi_alloc_spy.c -o mpi_alloc_spy.so -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
    static int (*next)(MPI_Aint, MPI_Info, void*) = NULL;
    if (next == NULL) next = (int (*)(MPI_Aint, MPI_Info, void*))dlsym(RTLD_NEXT, "MPI_Alloc_mem");
    const int status = next(size, info, baseptr);
    const char* rank = getenv("OMPI_COMM_WORLD_RANK");
    if (status == MPI_SUCCESS)
        fprintf(stderr, "alloc-spy rank %s size %ld offset %lu\n", rank ? rank : "?", (long)size,
                (unsigned long)((uintptr_t)(*(void**)baseptr) % 4096));
    return status;
}
