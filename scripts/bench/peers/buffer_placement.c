/* The cost of where two buffers lie relative to each other, without parbench or a peer:
 * a 64 KiB-per-rank allgather (or allreduce) timed the way IMB-MPI1 times it (each call
 * alone after a barrier, MPI_Wtime), for send and receive buffers at given offsets past a
 * page; every offset pair in each of 5 rounds, the best round kept. docs/reproducing.md
 * and results/2026-12-01-imb-osu-peers show its output.
 * Build and run: mpicc -O2 buffer_placement.c -o buffer_placement
 *                mpirun -np 2 ./buffer_placement [allgather|allreduce] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BYTES = 65536, ROUNDS = 5, WARMUP = 20, TIMED = 100 };
static const int offsets[] = {0, 16, 32, 48, 64, 2064};
#define OFFSETS ((int)(sizeof offsets / sizeof offsets[0]))

static char* page_aligned(size_t bytes) {
    void* p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0) {
        fprintf(stderr, "posix_memalign(4096, %zu) failed\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, 1, bytes);
    return p;
}

static double time_one(int allreduce, char* send, char* recv) {
    double total = 0.0;
    for (int i = 0; i < WARMUP + TIMED; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        if (allreduce)
            MPI_Allreduce(send, recv, BYTES / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else
            MPI_Allgather(send, BYTES, MPI_BYTE, recv, BYTES, MPI_BYTE, MPI_COMM_WORLD);
        if (i >= WARMUP) total += MPI_Wtime() - start;
    }
    return total / TIMED * 1e6;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const int allreduce = argc > 1 && strcmp(argv[1], "allreduce") == 0;
    char* send = page_aligned((size_t)BYTES * ranks + 8192);
    char* recv = page_aligned((size_t)BYTES * ranks + 8192);
    double best[OFFSETS][OFFSETS];
    for (int round = 0; round < ROUNDS; ++round)
        for (int s = 0; s < OFFSETS; ++s)
            for (int r = 0; r < OFFSETS; ++r) {
                const double us = time_one(allreduce, send + offsets[s], recv + offsets[r]);
                if (round == 0 || us < best[s][r]) best[s][r] = us;
            }
    if (rank == 0) {
        printf("%s, %d B per rank, best of %d rounds, us: rows send offset, columns receive offset\n      ",
               allreduce ? "allreduce" : "allgather", BYTES, ROUNDS);
        for (int r = 0; r < OFFSETS; ++r) printf("%7d", offsets[r]);
        printf("\n");
        for (int s = 0; s < OFFSETS; ++s) {
            printf("%6d", offsets[s]);
            for (int r = 0; r < OFFSETS; ++r) printf("%7.1f", best[s][r]);
            printf("\n");
        }
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
