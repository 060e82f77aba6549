// Plain MPI timing loops for allreduce, alltoall and reduce, written the two ways the peers that
// parbench is compared with time a collective, without any parbench code: the peers the CI's
// peer-drift guard (scripts/bench/peer_drift.py) runs where IMB-MPI1 and OSU cannot be installed.
//
//   --style imb   as IMB-MPI1 (IMB_allreduce.c, IMB_warm_up.c): send and receive buffers from
//                 MPI_Alloc_mem, one after the other; an untimed warm-up of a tenth of the
//                 repetitions; two barriers, then each call timed alone with MPI_Wtime and a
//                 barrier after it; the rank's mean over the repetitions.
//   --style osu   as OSU 5.3 (osu_coll.c, osu_allreduce.c): page-aligned buffers from
//                 posix_memalign; 200 warm-up and 1000 timed iterations (10 and 100 above 8 KiB),
//                 each call timed alone with MPI_Wtime, MPI_Barrier after it; the rank's mean.
// Both touch their buffers before timing and allocate them plainly: which pages they get is the
// kernel's choice (its THP setting), as for any program. Both use OSU's iteration counts (what
// scripts/bench/compare_peers.py gives IMB too). Sizes are the peers' convention: the whole buffer for
// allreduce and reduce (floats, sum, root 0), each per-peer block for alltoall (bytes).
//
//   mpirun -np 2 plain-collectives --style imb|osu allreduce:8 alltoall:1048576 ...
// Points run in the order given: give the small sizes first, as IMB and OSU run them (an 8 B
// point after a 1 MiB one in the same process read up to 200x slower now and then here).
// Rank 0 prints one JSON line per point: style, collective, bytes, iters, t_avg_us (the mean
// over ranks of the rank means: IMB's t_avg, OSU's Avg Latency), t_max_us (their max).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr long small_message = 8192;  // OSU's switch between its small and large iteration counts

struct Point {
    std::string collective;
    long bytes = 0;
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr, "plain-collectives: %s\nusage: plain-collectives --style imb|osu "
                         "{allreduce|alltoall|reduce}:BYTES ...\n", why);
    MPI_Abort(MPI_COMM_WORLD, 2);
    std::exit(2);
}

void check(int code, const char* call) {
    if (code != MPI_SUCCESS) {
        std::fprintf(stderr, "plain-collectives: %s failed (%d)\n", call, code);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

// The buffers of one point, freed the way they were allocated.
class Buffers {
  public:
    Buffers(bool imb, std::size_t send_bytes, std::size_t recv_bytes) : imb_(imb) {
        if (imb_) {  // IMB: the send buffer, then the receive buffer, from MPI_Alloc_mem
            check(MPI_Alloc_mem(static_cast<MPI_Aint>(send_bytes), MPI_INFO_NULL, &send_), "MPI_Alloc_mem");
            check(MPI_Alloc_mem(static_cast<MPI_Aint>(recv_bytes), MPI_INFO_NULL, &recv_), "MPI_Alloc_mem");
        } else if (posix_memalign(&send_, 4096, send_bytes) != 0 || posix_memalign(&recv_, 4096, recv_bytes) != 0) {
            usage("posix_memalign failed: out of memory");
        }
        std::memset(send_, 1, send_bytes);
        std::memset(recv_, 0, recv_bytes);
    }
    ~Buffers() {
        if (imb_) {
            MPI_Free_mem(send_);
            MPI_Free_mem(recv_);
        } else {
            std::free(send_);
            std::free(recv_);
        }
    }
    Buffers(const Buffers&) = delete;
    Buffers& operator=(const Buffers&) = delete;
    void* send() const { return send_; }
    void* recv() const { return recv_; }

  private:
    bool imb_;
    void* send_ = nullptr;
    void* recv_ = nullptr;
};

// OSU's timed iterations at a size.
int iterations(long bytes) { return bytes <= small_message ? 1000 : 100; }

void call(const Point& point, const Buffers& buffers) {
    const int floats = static_cast<int>(point.bytes / 4);
    if (point.collective == "allreduce")
        check(MPI_Allreduce(buffers.send(), buffers.recv(), floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    else if (point.collective == "reduce")
        check(MPI_Reduce(buffers.send(), buffers.recv(), floats, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    else
        check(MPI_Alltoall(buffers.send(), static_cast<int>(point.bytes), MPI_BYTE, buffers.recv(),
                           static_cast<int>(point.bytes), MPI_BYTE, MPI_COMM_WORLD),
              "MPI_Alltoall");
}

// This rank's mean time of one call, in seconds.
double rank_mean(const Point& point, bool imb, int ranks) {
    const std::size_t block = static_cast<std::size_t>(point.bytes);
    const std::size_t bytes = point.collective == "alltoall" ? block * static_cast<std::size_t>(ranks) : block;
    Buffers buffers(imb, bytes, bytes);
    const int iters = iterations(point.bytes);
    const int warmup = imb ? iters / 10 : (point.bytes <= small_message ? 200 : 10);
    double total = 0.0;
    if (imb) {
        for (int i = 0; i < warmup; ++i) call(point, buffers);
        for (int b = 0; b < 2; ++b) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        for (int i = 0; i < iters; ++i) {
            total -= MPI_Wtime();
            call(point, buffers);
            total += MPI_Wtime();
            check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        }
    } else {
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        for (int i = 0; i < warmup + iters; ++i) {
            const double start = MPI_Wtime();
            call(point, buffers);
            const double stop = MPI_Wtime();
            if (i >= warmup) total += stop - start;
            check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        }
    }
    return total / iters;
}

Point parse_point(const std::string& text) {
    const std::size_t colon = text.find(':');
    if (colon == std::string::npos) usage(("'" + text + "': give COLLECTIVE:BYTES").c_str());
    Point point{text.substr(0, colon), std::atol(text.c_str() + colon + 1)};
    if (point.collective != "allreduce" && point.collective != "alltoall" && point.collective != "reduce")
        usage(("'" + point.collective + "': allreduce, alltoall or reduce").c_str());
    if (point.bytes < 4 || (point.collective != "alltoall" && point.bytes % 4 != 0))
        usage(("'" + text + "': allreduce and reduce take a multiple of 4 bytes (floats), alltoall 4 or more").c_str());
    return point;
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc < 4 || std::string(argv[1]) != "--style") usage("give --style and at least one point");
    const std::string style = argv[2];
    if (style != "imb" && style != "osu") usage("--style takes imb or osu");
    std::vector<Point> points;
    for (int i = 3; i < argc; ++i) points.push_back(parse_point(argv[i]));
    for (const Point& point : points) {
        const double mean_us = rank_mean(point, style == "imb", ranks) * 1e6;
        double sum = 0.0, most = 0.0;
        check(MPI_Reduce(&mean_us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
        check(MPI_Reduce(&mean_us, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "MPI_Reduce");
        if (rank == 0)
            std::printf("{\"style\": \"%s\", \"collective\": \"%s\", \"bytes\": %ld, \"iters\": %d, \"t_avg_us\": %.4f, "
                        "\"t_max_us\": %.4f}\n",
                        style.c_str(), point.collective.c_str(), point.bytes, iterations(point.bytes),
                        sum / ranks, most);
    }
    MPI_Finalize();
    return 0;
}
