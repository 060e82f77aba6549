// parbench-observer-cost: what the --timeout watchdog's call observer adds to a communicator
// call (Google Benchmark). A train run with --timeout tells the watchdog of every blocking
// call and wait (Communicator::observe_calls); this times that notice alone, and an 8-byte
// allreduce and barrier with and without it. Run it on one rank (MPI's self path is the
// cheapest call there is, so the notice's share is the largest it can be):
//     mpirun -np 1 build/parbench-observer-cost --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <memory>

#include "bench/watchdog.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/mpi_session.hpp"

namespace parbench {
namespace {

// A watchdog that is on (its thread ticks every 100 ms and reads the calls) but never fires.
std::unique_ptr<Watchdog> quiet_watchdog() {
    auto watchdog = std::make_unique<Watchdog>(3600.0, 0, [](const std::string&) {});
    watchdog->enter({"timed", "train step", 0, 0});
    return watchdog;
}

void notice_alone(benchmark::State& state) {
    const auto watchdog = quiet_watchdog();
    const int channel = watchdog->add_channel("tp", {0});
    const CallObserver::Call call{"allreduce", 8, -1, -1, false};
    for (auto _ : state) {
        watchdog->call_started(channel, call);
        watchdog->call_ended(channel);
    }
}

void allreduce_8_bytes(benchmark::State& state) {
    const auto comm = MpiCommunicator::world();
    comm->stats().enabled = false;  // as the collective harness times: the notice alone differs
    const auto watchdog = quiet_watchdog();
    CallObservation observed;
    if (state.range(0) == 1) observed = comm->observe_calls(*watchdog, "tp", {0});
    double value = 1.0, sum = 0.0;
    for (auto _ : state) {
        comm->allreduce(&value, &sum, 1, DType::float64, ReduceOp::sum);
        benchmark::DoNotOptimize(sum);
    }
    state.SetLabel(state.range(0) == 1 ? "observed" : "not observed");
}

void barrier(benchmark::State& state) {
    const auto comm = MpiCommunicator::world();
    const auto watchdog = quiet_watchdog();
    CallObservation observed;
    if (state.range(0) == 1) observed = comm->observe_calls(*watchdog, "world", {0});
    for (auto _ : state) comm->barrier();
    state.SetLabel(state.range(0) == 1 ? "observed" : "not observed");
}

}  // namespace
}  // namespace parbench

int main(int argc, char** argv) {
    parbench::MpiSession session(argc, argv);
    benchmark::Initialize(&argc, argv);
    benchmark::RegisterBenchmark("notice_alone", parbench::notice_alone);
    benchmark::RegisterBenchmark("allreduce_8_bytes", parbench::allreduce_8_bytes)->Arg(0)->Arg(1);
    benchmark::RegisterBenchmark("barrier", parbench::barrier)->Arg(0)->Arg(1);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
