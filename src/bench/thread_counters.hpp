// What a timed window cost outside the work it timed, as the kernel counts it for the thread
// that ran it: page faults (minor: a page mapped or zeroed on first touch; major: read from
// disk) and involuntary context switches (the thread was preempted). Read with
// getrusage(RUSAGE_THREAD) before and after the window, never inside it: the timing thread
// alone, since the watchdog's thread sleeps and its wake-ups are not the measured work's.
//
// On these VMs first touch costs 12-15 us per 4 KiB page (DESIGN.md): a collective whose
// library maps fresh memory on every call (Open MPI's large-message temporaries, which glibc
// returns to the OS after each call) is dominated by faults, and its time is glibc's, not
// the network's. The warnings say so, with the fix.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/statistics.hpp"
#include "comm/communicator.hpp"

namespace parbench {

struct ThreadCounters {
    std::uint64_t minor_faults = 0;
    std::uint64_t major_faults = 0;
    std::uint64_t involuntary_switches = 0;
};

// The calling thread's counters since it started. Throws RuntimeFailure if getrusage fails.
ThreadCounters read_thread_counters();
// after - before, per counter.
ThreadCounters counters_between(const ThreadCounters& before, const ThreadCounters& after);
ThreadCounters& operator+=(ThreadCounters& total, const ThreadCounters& more);

// Every rank's counters, in rank order, on every rank. Collective over `comm`.
std::vector<ThreadCounters> gather_thread_counters(const ThreadCounters& own, Communicator& comm);

// Warnings for one window of `calls` calls per rank, from every rank's counters: kind
// "page-faults" when some rank averaged at least one fault per call (buffers are touched
// before timing, so a steady state takes none), "preempted" when some rank was switched
// out involuntarily in at least one call in ten. `what` names a call ("call", "step").
std::vector<Warning> thread_counter_warnings(const std::vector<ThreadCounters>& by_rank, std::uint64_t calls,
                                             const std::string& what);

// The report's "thread_counters" (schemas/report.schema.json) for a window of `calls` calls
// (or steps) per rank, described by `window`.
nlohmann::json thread_counters_json(const std::vector<ThreadCounters>& by_rank, std::uint64_t calls,
                                    const std::string& window);

// The fix for "page-faults", printed once per run beside the warnings' tally.
std::string page_fault_hint();

}  // namespace parbench
