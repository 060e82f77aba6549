// A plain MPI_Allreduce timing loop with parbench's method (warm-up, then per iteration:
// barrier, time one call, keep the maximum over ranks; report the median), written without
// any parbench code. scripts/bench/bench_harness.py runs it beside `parbench allreduce` to show
// that the harness reports the same bandwidth and to measure its overhead at small sizes.
//   mpirun -np 2 plain-allreduce BYTES [WARMUP ITERS]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    if (argc < 2) {
        std::fprintf(stderr, "usage: plain-allreduce BYTES [WARMUP ITERS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const long bytes = std::atol(argv[1]);
    const int warmup = argc > 2 ? std::atoi(argv[2]) : 5;
    const int iters = argc > 3 ? std::atoi(argv[3]) : 20;
    const int count = static_cast<int>(bytes / 4);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    std::vector<float> send(static_cast<std::size_t>(count), 1.0f), recv(static_cast<std::size_t>(count), 0.0f);
    for (int i = 0; i < warmup; ++i)
        MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::vector<double> local(static_cast<std::size_t>(iters)), slowest(local.size());
    for (int i = 0; i < iters; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const auto start = std::chrono::steady_clock::now();
        MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        local[static_cast<std::size_t>(i)] =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    }
    MPI_Reduce(local.data(), slowest.data(), iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        std::sort(slowest.begin(), slowest.end());
        const std::size_t middle = slowest.size() / 2;
        const double median =
            slowest.size() % 2 ? slowest[middle] : (slowest[middle - 1] + slowest[middle]) / 2.0;
        const double algbw = static_cast<double>(count) * 4.0 / median / 1e3;
        const double busbw = algbw * 2.0 * (size - 1) / size;
        std::printf("{\"bytes\": %ld, \"ranks\": %d, \"median_us\": %.4f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f}\n",
                    static_cast<long>(count) * 4, size, median, algbw, busbw);
    }
    MPI_Finalize();
    return 0;
}
