// parbench-call-path-cost: what parbench's layers add to one timed collective call, beside
// the bare MPI call the peers (OSU, IMB) time (Google Benchmark). At 8 bytes a call costs
// 0.2-0.4 us between two ranks here, so tens of nanoseconds of harness work inside the
// timed window are a tenth of the figure. Run it on one rank, where MPI's self path is the
// cheapest call there is and the layers' share is the largest it can be:
//     mpirun -np 1 build/parbench-call-path-cost --benchmark_repetitions=5
// Each benchmark times a whole timed window: clock read, call, clock read.
#include <benchmark/benchmark.h>

#include <mpi.h>

#include <chrono>
#include <memory>

#include "collectives/collective.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/mpi_session.hpp"
#include "device/cpu_device.hpp"

namespace parbench {
namespace {

using Clock = std::chrono::steady_clock;

// What OSU and IMB time: MPI_Wtime, MPI_Bcast of 8 chars, MPI_Wtime.
void bare_mpi_bcast(benchmark::State& state) {
    char buffer[8] = {};
    double total = 0;
    for (auto _ : state) {
        const double start = MPI_Wtime();
        MPI_Bcast(buffer, 8, MPI_CHAR, 0, MPI_COMM_WORLD);
        total += MPI_Wtime() - start;
    }
    benchmark::DoNotOptimize(total);
}

// The same for an 8-byte float allreduce, the harness's other window below.
void bare_mpi_allreduce(benchmark::State& state) {
    float send[2] = {1, 2}, recv[2] = {};
    double total = 0;
    for (auto _ : state) {
        const double start = MPI_Wtime();
        MPI_Allreduce(send, recv, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        total += MPI_Wtime() - start;
    }
    benchmark::DoNotOptimize(total);
}

// The communicator's call with counting off, as the harness times it.
void communicator_broadcast(benchmark::State& state) {
    const auto comm = MpiCommunicator::world();
    comm->stats().enabled = false;
    float buffer[2] = {};
    double total = 0;
    for (auto _ : state) {
        const auto start = Clock::now();
        comm->broadcast(buffer, buffer, 2, DType::float32, 0);
        total += std::chrono::duration<double>(Clock::now() - start).count();
    }
    benchmark::DoNotOptimize(total);
}

// The harness's window: the device timer around the registry's collective, prepared once
// (Communicator::prepare), as CollectiveHarness times it.
void harness_window(benchmark::State& state, const char* name) {
    const auto comm = MpiCommunicator::world();
    comm->stats().enabled = false;
    const Collective& collective = *find_collective(name);
    CpuDevice device;
    const auto timer = device.make_timer();
    const BufferShape shape = collective.shape(2, comm->size(), comm->rank(), CollectiveParams{});
    Buffer send = device.allocate(shape.send_count * sizeof(float));
    Buffer recv = device.allocate(shape.recv_count * sizeof(float));
    const CollectiveParams params;
    const auto op = comm->prepare([&] { collective.run(*comm, send.data(), recv.data(), 2, params); });
    double total = 0;
    for (auto _ : state) {
        timer->start();
        op->run();
        timer->stop();
        total += timer->elapsed_us();
    }
    benchmark::DoNotOptimize(total);
}

}  // namespace
}  // namespace parbench

int main(int argc, char** argv) {
    parbench::MpiSession session(argc, argv, parbench::MpiThreadLevel::single);
    benchmark::Initialize(&argc, argv);
    benchmark::RegisterBenchmark("bare_mpi_bcast", parbench::bare_mpi_bcast);
    benchmark::RegisterBenchmark("bare_mpi_allreduce", parbench::bare_mpi_allreduce);
    benchmark::RegisterBenchmark("communicator_broadcast", parbench::communicator_broadcast);
    benchmark::RegisterBenchmark("harness_window/broadcast", parbench::harness_window, "broadcast");
    benchmark::RegisterBenchmark("harness_window/allreduce", parbench::harness_window, "allreduce");
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
