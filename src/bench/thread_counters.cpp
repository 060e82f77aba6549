#include "bench/thread_counters.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "core/error.hpp"

namespace parbench {

ThreadCounters read_thread_counters() {
    rusage usage{};
    if (getrusage(RUSAGE_THREAD, &usage) != 0)
        throw RuntimeFailure(std::string("getrusage(RUSAGE_THREAD) failed: ") + std::strerror(errno));
    return {static_cast<std::uint64_t>(usage.ru_minflt), static_cast<std::uint64_t>(usage.ru_majflt),
            static_cast<std::uint64_t>(usage.ru_nivcsw)};
}

ThreadCounters counters_between(const ThreadCounters& before, const ThreadCounters& after) {
    return {after.minor_faults - before.minor_faults, after.major_faults - before.major_faults,
            after.involuntary_switches - before.involuntary_switches};
}

ThreadCounters& operator+=(ThreadCounters& total, const ThreadCounters& more) {
    total.minor_faults += more.minor_faults;
    total.major_faults += more.major_faults;
    total.involuntary_switches += more.involuntary_switches;
    return total;
}

std::vector<ThreadCounters> gather_thread_counters(const ThreadCounters& own, Communicator& comm) {
    const std::uint64_t mine[3] = {own.minor_faults, own.major_faults, own.involuntary_switches};
    std::vector<std::uint64_t> all(3 * static_cast<std::size_t>(comm.size()));
    comm.allgather(mine, all.data(), 3, DType::uint64);
    std::vector<ThreadCounters> by_rank;
    for (std::size_t r = 0; r < all.size(); r += 3) by_rank.push_back({all[r], all[r + 1], all[r + 2]});
    return by_rank;
}

std::vector<Warning> thread_counter_warnings(const std::vector<ThreadCounters>& by_rank, std::uint64_t calls,
                                             const std::string& what) {
    std::vector<Warning> warnings;
    if (calls == 0 || by_rank.empty()) return warnings;
    const double n = static_cast<double>(calls);
    const auto faults = [&](std::size_t r) { return by_rank[r].minor_faults + by_rank[r].major_faults; };
    std::size_t worst_faults = 0, worst_switches = 0;
    for (std::size_t r = 1; r < by_rank.size(); ++r) {
        if (faults(r) > faults(worst_faults)) worst_faults = r;
        if (by_rank[r].involuntary_switches > by_rank[worst_switches].involuntary_switches) worst_switches = r;
    }
    const ThreadCounters& f = by_rank[worst_faults];
    if (static_cast<double>(f.minor_faults + f.major_faults) >= n) {
        std::ostringstream text;
        text << std::fixed;
        text.precision(1);
        text << "rank " << worst_faults << " took " << static_cast<double>(f.minor_faults) / n << " minor and "
             << static_cast<double>(f.major_faults) / n << " major page faults per " << what
             << " in the timed window: memory mapped afresh on every " << what
             << ", whose first touch is in the time; " << page_fault_hint();
        warnings.push_back({"page-faults", text.str()});
    }
    const ThreadCounters& s = by_rank[worst_switches];
    if (static_cast<double>(s.involuntary_switches) * 10.0 >= n) {
        std::ostringstream text;
        text << std::fixed;
        text.precision(1);
        text << "rank " << worst_switches << " was preempted " << static_cast<double>(s.involuntary_switches) / n
             << " times per " << what
             << " in the timed window (involuntary context switches): another process or thread shares its core; "
                "bind ranks to cores (mpirun --bind-to core), run fewer ranks than cores, or stop what else runs";
        warnings.push_back({"preempted", text.str()});
    }
    return warnings;
}

nlohmann::json thread_counters_json(const std::vector<ThreadCounters>& by_rank, std::uint64_t calls,
                                    const std::string& window) {
    nlohmann::json minor = nlohmann::json::array(), major = nlohmann::json::array(),
                   switches = nlohmann::json::array();
    for (const ThreadCounters& c : by_rank) {
        minor.push_back(c.minor_faults);
        major.push_back(c.major_faults);
        switches.push_back(c.involuntary_switches);
    }
    return {{"window", window},
            {"source", "getrusage(RUSAGE_THREAD) of the timing thread, read outside the window"},
            {"calls", calls},
            {"minor_faults_by_rank", minor},
            {"major_faults_by_rank", major},
            {"involuntary_switches_by_rank", switches}};
}

std::string page_fault_hint() {
    // Both settings: mmap_max=0 alone moves the blocks to the heap, whose top glibc still
    // returns to the OS on free (trim_threshold, 128 KiB by default), so each call faults
    // them in again; and MALLOC_MMAP_THRESHOLD_ cannot be raised above 32 MiB on 64-bit.
    return "when it is MPI's temporaries for large messages (glibc returns freed large blocks to the OS), keep "
           "them mapped: mpirun -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824";
}

}  // namespace parbench
