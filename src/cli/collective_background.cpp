#include "cli/collective_background.hpp"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <sstream>
#include <thread>

#include "core/error.hpp"

namespace parbench {

MpiThreadLevel background_thread_level(const BackgroundSpec& spec, MpiThreadLevel requested, bool requested_given) {
    const MpiThreadLevel needed =
        spec.kind == BackgroundSpec::Kind::collective ? MpiThreadLevel::multiple : MpiThreadLevel::funneled;
    if (static_cast<int>(requested) >= static_cast<int>(needed)) return requested;
    if (requested_given)
        throw UsageError("--background " + background_name(spec) + " needs --mpi-threads " +
                         std::string(thread_level_name(needed)) + " (" +
                         (needed == MpiThreadLevel::multiple ? "two threads call MPI at once"
                                                             : "a second thread runs beside MPI's") +
                         "); drop --mpi-threads " + std::string(thread_level_name(requested)) + " or raise it");
    return needed;
}

BackgroundRunner::BackgroundRunner(const BackgroundSpec& spec, Communicator& data, Communicator& control, Device& device)
    : spec_(spec), control_(control), load_(make_background_load(spec, device, data)) {}

void BackgroundRunner::measure_under_load(CollectiveHarness& harness, const PointSpec& spec, CollectiveResult& result,
                                          const std::vector<std::string>& hosts, int timed_calls) {
    if (result.skipped) return;
    // The load alone, as long as the point's timed calls took (the same on every rank: the
    // reported time is every rank's).
    const double window_s = std::clamp(result.reported_time_us * timed_calls / 1e6, 0.05, 1.0);
    control_.barrier();
    load_->start();
    std::this_thread::sleep_for(std::chrono::duration<double>(window_s));
    const BackgroundTally alone = load_->stop();

    control_.barrier();
    load_->start();
    const PointMeasurement measurement = harness.measure(spec);
    const BackgroundTally loaded = load_->stop();

    CollectiveResult under = result;
    derive_statistics(under, measurement.times, hosts);
    if (measurement.wrong && result.wrong) result.wrong = *result.wrong + *measurement.wrong;
    const double slowdown = result.reported_time_us > 0.0 ? under.reported_time_us / result.reported_time_us : 0.0;
    result.extra["background"] = {
        {"load", background_name(spec_)},
        {"unit", background_unit(spec_)},
        {"time_alone_us", result.reported_time_us},
        {"time_loaded_us", under.reported_time_us},
        {"slowdown", slowdown},
        {"busbw_loaded_gbps", under.busbw_gbps},
        {"samples_loaded_us", under.samples_us},
        {"load_alone", alone.throughput},
        {"load_with_collective", loaded.throughput},
        {"load_ratio", alone.throughput > 0.0 ? loaded.throughput / alone.throughput : 0.0},
        {"load_units", {{"alone", alone.units}, {"with_collective", loaded.units}}},
        {"wrong_loaded", measurement.wrong ? nlohmann::json(*measurement.wrong) : nlohmann::json(nullptr)},
    };
}

std::string background_line(const CollectiveResult& result) {
    if (!result.extra.is_object() || !result.extra.contains("background")) return {};
    const nlohmann::json& b = result.extra["background"];
    std::ostringstream line;
    line << std::fixed << std::setprecision(2) << "#   under " << b["load"].get<std::string>() << ": "
         << (result.inplace ? "in-place " : "out-of-place ") << b["time_loaded_us"].get<double>() << " us x"
         << b["slowdown"].get<double>() << "; load " << b["load_alone"].get<double>() << " -> "
         << b["load_with_collective"].get<double>() << ' ' << b["unit"].get<std::string>() << " (x"
         << b["load_ratio"].get<double>() << ")";
    if (!b["wrong_loaded"].is_null() && b["wrong_loaded"].get<std::uint64_t>() > 0)
        line << "; " << b["wrong_loaded"].get<std::uint64_t>() << " WRONG under load";
    return line.str();
}

}  // namespace parbench
