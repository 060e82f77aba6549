// `parbench <collective>` and `parbench all`: sweep sizes, time each point with the
// harness, print rows as they finish and rewrite the report files after each one, so a
// crash keeps what was measured.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "bench/collective_harness.hpp"
#include "bench/collective_sweep.hpp"
#include "bench/watchdog.hpp"
#include "cli/buffer_pages_flag.hpp"
#include "cli/call_arguments_check.hpp"
#include "cli/collective_background.hpp"
#include "cli/collective_expectation.hpp"
#include "cli/collective_groups.hpp"
#include "cli/command.hpp"
#include "cli/job_environment.hpp"
#include "cli/job_watchdog.hpp"
#include "cli/memory_check.hpp"
#include "cli/mpi_scope.hpp"
#include "cli/nccl_run_report.hpp"
#include "cli/nccl_tests_flags.hpp"
#include "cli/rank_agreement.hpp"
#include "cli/stop_signals.hpp"
#include "collectives/collective.hpp"
#include "collectives/one_rank_shortcut.hpp"
#include "comm/backend.hpp"
#include "comm/mpi_session.hpp"
#include "core/console.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "core/memory_budget.hpp"
#include "core/nvtx.hpp"
#include "core/size_parse.hpp"
#include "report/collective_result.hpp"
#include "report/console_table.hpp"
#include "report/csv_report.hpp"
#include "report/kept_report.hpp"
#include "report/repetitions.hpp"
#include "report/report_document.hpp"

namespace parbench {
namespace {

struct CollectiveOptions {
    std::string command;  // a collective's name or "all"
    std::optional<std::string> size;
    std::string min_bytes = "32M";
    std::string max_bytes = "32M";
    std::optional<double> step_factor;      // 2 unless -i/--step-bytes is given alone
    std::optional<std::string> step_bytes;  // a fixed increment instead of the factor (nccl-tests' -i)
    std::string dtype = "float32";  // or "all": every type in turn (nccl-tests' -d all)
    std::string op = "sum";         // or "all"
    std::string root = "0";         // a rank, or "all": every rank in turn
    int warmup = 5;
    int iters = 20;
    std::string timing = "per-iter";
    int batch_size = 10;
    bool graph = false;
    bool nccl_choices = false;  // NCCL's per-call TUNING log: each point's algorithm, protocol, channels
    std::string placement = "both";
    bool inplace = false;  // shorthand for --placement in
    std::optional<std::string> check;  // -c/--check [N]: N checked runs per size (nccl-tests' -c N); no N: 1
    bool no_check = false;
    bool full = false;       // --full: OSU's full statistics in the console
    std::string aggregate = "max";
    std::string mpi_threads = "single";
    bool verbose = false;
    bool quiet = false;
    std::string json_path;
    std::string csv_path;
    std::string backend = "auto";
    double timeout_s = 0.0;
    double progress_s = 30.0;         // a progress line when one point runs this long (0: none)
    std::optional<double> min_busbw;  // --min-busbw (GB/s); without it NCCL_TESTS_MIN_BW, as nccl-tests reads
    std::optional<int> inject_hang_rank;
    std::string groups;  // --groups: host, cross-host or N
    std::optional<int> inject_straggler_rank;
    double inject_straggler_us = 2000.0;
    double inject_slowdown = 1.0;  // fault injection: busbw reads about this fraction (bench/collective_harness.hpp)
    std::string buffer_offsets;  // --buffer-offsets SEND[,RECV][:SEND,RECV...]
    std::string off_cache;       // --off-cache SIZE: IMB's -off_cache (bench/collective_harness.hpp)
    bool nonblocking = false;    // --nonblocking: the MPI_I* call and its wait (IMB-NBC's *_pure)
    std::string skew = "uniform";  // alltoallv's per-destination blocks (collectives/skew.hpp)
    std::uint64_t skew_seed = 1;
    std::string direction = "dispatch";  // alltoallv's blocks out or back (collectives/skew.hpp)
    ExpectationOptions expectation;      // --cluster, --expect-host, --min-ratio
    std::string background;              // --background gemm[:N]|stream[:BYTES]|collective[:BYTES]
    NcclTestsFlags nccl_tests;           // nccl-tests' own flags, as given (cli/nccl_tests_flags.hpp)
    // Set from them (apply_nccl_tests_flags) where parbench has no flag of the same name:
    std::optional<std::size_t> unalign_elements;  // -u
    bool memory_report = false;                   // -M 1
    std::string graph_flag = "--graph";           // how the messages name the CUDA graph flag given
    std::vector<std::string> nccl_tests_translations;
    int repeat = 1;  // whole sweeps (report/repetitions.hpp); 0: until SIGINT or SIGTERM
};

// Where a rank's send and receive buffers start past a page (--buffer-offsets).
struct BufferOffsets {
    std::size_t send = 0;
    std::size_t recv = 0;
};

// The options after parsing, in the types the harness takes.
struct ResolvedOptions {
    std::vector<const Collective*> collectives;
    std::vector<std::uint64_t> sizes;
    bool exact_size = false;  // --size on a single collective: refuse to round
    CollectiveParams params;  // the first case's; skew and direction are every case's
    // The cases each collective runs, nccl-tests' loops: types, then ops (reducing
    // collectives), then roots (rooted ones; every rank when all_roots).
    std::vector<DType> types;
    std::vector<ReduceOp> ops;
    bool all_roots = false;
    int check_runs = 1;  // 0: --no-check
    bool full = false;
    bool memory_report = false;
    std::vector<std::string> nccl_tests_translations;
    TimingOptions timing;
    BackendChoice backend = BackendChoice::automatic;
    Placements placements;
    Aggregation aggregation = Aggregation::max;
    MpiThreadLevel mpi_threads = MpiThreadLevel::single;
    std::optional<GroupsSpec> groups;
    std::vector<BufferOffsets> buffer_offsets{BufferOffsets{}};  // one for every rank, or one per rank
    std::optional<BusbwGate> min_busbw;
    ExpectationPlan expectation;
    std::optional<BackgroundSpec> background;
};

// --min-busbw, else nccl-tests' NCCL_TESTS_MIN_BW (GB/s), so a job script written for
// nccl-tests keeps its gate; the flag wins when both are given.
std::optional<BusbwGate> resolve_busbw_gate(const CollectiveOptions& options) {
    if (options.min_busbw) {
        if (!(std::isfinite(*options.min_busbw) && *options.min_busbw > 0))
            throw UsageError("--min-busbw must be a positive number of GB/s (the lowest average busbw that passes)");
        return BusbwGate{*options.min_busbw, "--min-busbw"};
    }
    const char* variable = std::getenv("NCCL_TESTS_MIN_BW");
    if (variable == nullptr || *variable == '\0') return std::nullopt;
    const std::string text = variable;
    char* end = nullptr;
    const double gbps = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !(std::isfinite(gbps) && gbps > 0))
        throw UsageError("NCCL_TESTS_MIN_BW='" + text + "': not a positive number of GB/s; set it to one (e.g. 100) "
                         "or unset it");
    return BusbwGate{gbps, "NCCL_TESTS_MIN_BW"};
}

BufferOffsets offsets_of_rank(const ResolvedOptions& resolved, int rank) {
    return resolved.buffer_offsets.size() == 1 ? resolved.buffer_offsets.front()
                                               : resolved.buffer_offsets.at(static_cast<std::size_t>(rank));
}

// The flags of issue 10's collective habits: placement, aggregation, thread level, output.
void resolve_reporting(const CollectiveOptions& options, ResolvedOptions& resolved) {
    if (options.placement == "out")
        resolved.placements = {true, false};
    else if (options.placement == "in")
        resolved.placements = {false, true};
    else if (options.placement == "both")
        resolved.placements = {true, true};
    else
        throw UsageError("--placement '" + options.placement + "': use out, in or both");
    if (options.inplace) {
        if (options.placement != "both" && options.placement != "in")
            throw UsageError("--inplace is --placement in; drop one of --inplace and --placement " + options.placement);
        resolved.placements = {false, true};
    }
    const auto aggregation = parse_aggregation(options.aggregate);
    if (!aggregation)
        throw UsageError("--aggregate '" + options.aggregate + "': use max, mean, rank-mean, rank-max, rank-min or rank0");
    resolved.aggregation = *aggregation;
    const auto threads = parse_thread_level(options.mpi_threads);
    if (!threads || *threads == MpiThreadLevel::serialized)
        throw UsageError("--mpi-threads '" + options.mpi_threads + "': use single, funneled or multiple");
    resolved.mpi_threads = *threads;
    if (!options.background.empty()) {
        resolved.background = parse_background(options.background);
        resolved.mpi_threads =
            background_thread_level(*resolved.background, resolved.mpi_threads, options.mpi_threads != "single");
    }
    if (options.verbose && options.quiet) throw UsageError("--verbose and --quiet contradict each other; give one");
    if (options.inject_straggler_us < 0) throw UsageError("--inject-straggler-us must be 0 or more");
    resolved.timing.inject_straggler_rank = options.inject_straggler_rank;
    resolved.timing.inject_straggler_us = options.inject_straggler_us;
    if (!(options.inject_slowdown > 0.0 && options.inject_slowdown <= 1.0))
        throw UsageError("--inject-slowdown is the fraction of its busbw a point keeps, in (0, 1] (e.g. 0.7)");
    resolved.timing.inject_slowdown = options.inject_slowdown;
}

// --buffer-offsets SEND[,RECV][:SEND,RECV...]: bytes past the allocation's start, below a
// page, in whole elements (RECV defaults to SEND); one pair for every rank, or one per rank
// (rank 0's first), which is how two processes' heaps differ (docs/reproducing.md, IMB-MPI1).
std::vector<BufferOffsets> parse_buffer_offsets(const std::string& text, DType type) {
    if (text.empty()) return {BufferOffsets{}};
    const auto offset = [&](const std::string& part) {
        const bool digits = !part.empty() && part.size() <= 4 &&
                            std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!digits || std::stoul(part) >= 4096)
            throw UsageError("--buffer-offsets '" + text +
                             "': give SEND[,RECV] for every rank or SEND,RECV:SEND,RECV... one pair per rank, each a "
                             "byte count from 0 to 4095 (e.g. 0,16)");
        const std::size_t value = std::stoul(part);
        if (value % dtype_size(type) != 0)
            throw UsageError("--buffer-offsets '" + text + "': " + part + " is not a whole number of " +
                             std::string(dtype_name(type)) + " elements (" + std::to_string(dtype_size(type)) +
                             " bytes each); use a multiple of " + std::to_string(dtype_size(type)));
        return value;
    };
    std::vector<BufferOffsets> offsets;
    std::size_t begin = 0;
    for (;;) {
        const std::size_t end = text.find(':', begin);
        const std::string pair = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
        const std::size_t comma = pair.find(',');
        const std::size_t send = offset(pair.substr(0, comma));
        offsets.push_back({send, comma == std::string::npos ? send : offset(pair.substr(comma + 1))});
        if (end == std::string::npos) return offsets;
        begin = end + 1;
    }
}

std::string placement_name(const Placements& placements) {
    return placements.out_of_place && placements.in_place ? "both" : placements.in_place ? "in" : "out";
}

std::string names_of_types() {
    std::string names;
    for (DType t : all_dtypes()) names += (names.empty() ? "" : ", ") + std::string(dtype_name(t));
    return names;
}

// --dtype, --op, --root: one each, or "all" for every one in turn (nccl-tests' -d all, -o all,
// -r all); the type in nccl-tests' names too (half, float, double).
void resolve_cases(const CollectiveOptions& options, ResolvedOptions& resolved) {
    if (options.dtype == "all") {
        resolved.types.assign(all_dtypes().begin(), all_dtypes().end());
    } else {
        const auto type = parse_dtype(parbench_dtype_name(options.dtype));
        if (!type) throw UsageError("--dtype '" + options.dtype + "': unknown type; use one of " + names_of_types() + " or all");
        resolved.types = {*type};
    }
    if (options.op == "all") {
        resolved.ops.assign(all_reduce_ops().begin(), all_reduce_ops().end());
    } else {
        const auto op = parse_reduce_op(options.op);
        if (!op && options.op == "mulsum")
            throw UsageError("-o/--op mulsum: NCCL's pre-multiplied sum (ncclRedOpCreatePreMulSum) has no MPI form; "
                             "use sum (the same traffic), or all for sum, prod, max, min and avg");
        if (!op) throw UsageError("--op '" + options.op + "': unknown operation; use sum, prod, max, min, avg or all");
        resolved.ops = {*op};
    }
    const bool any_reducing = std::any_of(resolved.collectives.begin(), resolved.collectives.end(),
                                          [](const Collective* c) { return c->reducing(); });
    // One type and one op that do not go together are refused; with "all", the cases_of loop
    // leaves such pairs out (avg on integers), as MPI has no form of them.
    if (any_reducing && resolved.types.size() == 1 && resolved.ops.size() == 1)
        if (auto reason = reduce_op_unsupported_reason(resolved.ops.front(), resolved.types.front()))
            throw UsageError(*reason);
    int root = 0;
    if (options.root == "all") {
        resolved.all_roots = true;
    } else {
        const bool digits = !options.root.empty() && options.root.size() <= 9 &&
                            std::all_of(options.root.begin(), options.root.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!digits) throw UsageError("--root '" + options.root + "': give a rank (0 or more) or all");
        root = std::stoi(options.root);
    }
    resolved.params = {resolved.types.front(), resolved.ops.front(), root, parse_skew(options.skew, options.skew_seed),
                       parse_direction(options.direction)};
}

// Every (type, op, root) `collective` runs at, in nccl-tests' order (types, then ops, then
// roots); ops only for reducing collectives, roots only for rooted ones.
std::vector<CollectiveParams> cases_of(const Collective& collective, const ResolvedOptions& resolved, int nranks) {
    std::vector<ReduceOp> ops = collective.reducing() ? resolved.ops : std::vector<ReduceOp>{resolved.params.op};
    std::vector<int> roots{resolved.params.root};
    if (collective.rooted() && resolved.all_roots) {
        roots.clear();
        for (int r = 0; r < nranks; ++r) roots.push_back(r);
    }
    std::vector<CollectiveParams> cases;
    for (DType type : resolved.types)
        for (ReduceOp op : ops) {
            if (collective.reducing() && reduce_op_unsupported_reason(op, type)) continue;
            for (int root : roots) {
                CollectiveParams params = resolved.params;
                params.type = type;
                params.op = op;
                params.root = root;
                cases.push_back(params);
            }
        }
    return cases;
}

// The widest type of the run: offsets and memory are judged at it.
DType widest_type(const ResolvedOptions& resolved) {
    return *std::max_element(resolved.types.begin(), resolved.types.end(),
                             [](DType a, DType b) { return dtype_size(a) < dtype_size(b); });
}

// --repeat's bound: a report holds every sweep's points.
constexpr int max_repeat = 10000;

ResolvedOptions resolve(const CollectiveOptions& options) {
    ResolvedOptions resolved;
    if (options.command == "all") {
        const auto all = all_collectives();
        resolved.collectives.assign(all.begin(), all.end());
    } else {
        resolved.collectives.push_back(find_collective(options.command));
    }
    resolve_cases(options, resolved);

    if (options.size) {
        resolved.sizes = {parse_size(*options.size, "--size")};
        resolved.exact_size = options.command != "all";
    } else {
        const auto min = parse_size(options.min_bytes, "-b/--min-bytes");
        const auto max = parse_size(options.max_bytes, "-e/--max-bytes");
        if (min > max)
            throw UsageError("-b/--min-bytes (" + options.min_bytes + ") is larger than -e/--max-bytes (" +
                             options.max_bytes + "); swap them or raise -e");
        // nccl-tests steps by -i only when no factor above 1 is given (common.cu's size loop).
        const bool linear = options.step_bytes && !(options.step_factor && *options.step_factor > 1.0);
        if (linear) {
            resolved.sizes = linear_sizes(min, max, parse_size(*options.step_bytes, "-i/--step-bytes"));
        } else {
            const double factor = options.step_factor.value_or(2.0);
            if (min < max && factor <= 1.0)
                throw UsageError("-f/--step-factor must be above 1 for a sweep (e.g. -f 2), or give -i/--step-bytes "
                                 "for a fixed increment");
            resolved.sizes = geometric_sizes(min, max, factor);
        }
    }

    if (options.warmup < 0) throw UsageError("--warmup must be 0 or more");
    if (options.iters < 1) throw UsageError("--iters must be at least 1");
    if (options.repeat < 0 || options.repeat > max_repeat)
        throw UsageError("--repeat " + std::to_string(options.repeat) + ": give the whole sweeps to run, 1 to " +
                         std::to_string(max_repeat) + " (e.g. --repeat 5), or 0 to run until SIGINT or SIGTERM");
    if (options.batch_size < 1) throw UsageError("--batch-size must be at least 1");
    if (options.timeout_s < 0) throw UsageError("--timeout must be 0 (off) or a positive number of seconds");
    if (!(std::isfinite(options.progress_s) && options.progress_s >= 0))
        throw UsageError("--progress must be 0 (off) or a positive number of seconds (e.g. --progress 30)");
    if (options.timing == "per-iter")
        resolved.timing.mode = TimingMode::per_iteration;
    else if (options.timing == "batched")
        resolved.timing.mode = TimingMode::batched;
    else
        throw UsageError("--timing '" + options.timing + "': use per-iter or batched");
    resolved.timing.warmup = options.warmup;
    resolved.timing.iters = options.iters;
    resolved.timing.batch_size = options.batch_size;
    resolved.timing.graph = options.graph;
    resolved.timing.inject_hang_rank = options.inject_hang_rank;
    if (!options.off_cache.empty()) {
        resolved.timing.off_cache_bytes = parse_size(options.off_cache, "--off-cache");  // refuses 0
        if (options.graph)
            throw UsageError("--off-cache rotates the buffers, which " + options.graph_flag +
                             " would fix in its captured calls; drop one of them");
    }
    resolved.timing.nonblocking = options.nonblocking;
    if (options.nonblocking) {
        for (const Collective* c : resolved.collectives)
            if (!c->has_nonblocking())
                throw UsageError("--nonblocking: " + std::string(c->name()) +
                                 " has no non-blocking form here; give allreduce, allgather or reducescatter");
        if (options.graph)
            throw UsageError("--nonblocking waits on each request on the host, which " + options.graph_flag +
                             " cannot capture; drop one of them");
    }
    resolved.groups = parse_groups(options.groups);
    resolved.backend = parse_backend(options.backend);
    if (resolved.backend == BackendChoice::mpi && options.graph)
        throw UsageError(options.graph_flag + " replays CUDA graphs; it needs --backend nccl (or auto on GPUs)");
    resolve_reporting(options, resolved);
    resolved.buffer_offsets = parse_buffer_offsets(options.buffer_offsets, widest_type(resolved));
    if (options.unalign_elements) {
        if (!options.buffer_offsets.empty())
            throw UsageError("-u (--unalign) and --buffer-offsets both place the buffers; keep one");
        if (resolved.types.size() > 1)
            throw UsageError("-u (--unalign) counts elements, which differ in size between -d all's types; give one -d "
                             "with -u, or --buffer-offsets in bytes");
        const std::size_t bytes = *options.unalign_elements * dtype_size(resolved.types.front());
        if (bytes >= 4096)
            throw UsageError("-u (--unalign) " + std::to_string(*options.unalign_elements) + ": " + std::to_string(bytes) +
                             " bytes is a page or more; give fewer elements (below 4096 bytes)");
        resolved.buffer_offsets = {BufferOffsets{bytes, bytes}};
    }
    resolved.check_runs = options.no_check ? 0 : check_runs_of(options.check.value_or(""));
    if (options.no_check && options.check)
        throw UsageError("-c/--check and --no-check both given; keep one (-c 0 is --no-check)");
    resolved.full = options.full;
    resolved.memory_report = options.memory_report;
    resolved.nccl_tests_translations = options.nccl_tests_translations;
    resolved.min_busbw = resolve_busbw_gate(options);
    resolved.expectation = resolve_expectation(options.expectation);
    return resolved;
}

nlohmann::json buffer_offsets_json(const std::vector<BufferOffsets>& offsets) {
    nlohmann::json pairs = nlohmann::json::array();
    for (const BufferOffsets& o : offsets) pairs.push_back({{"send", o.send}, {"recv", o.recv}});
    return pairs;
}

// What every rank must agree on before MPI work starts, and the report's config (which adds
// the thread level MPI provided, once it has started).
nlohmann::json config_json(const CollectiveOptions& options, const ResolvedOptions& resolved) {
    nlohmann::json collectives = nlohmann::json::array();
    for (const Collective* c : resolved.collectives) collectives.push_back(c->name());
    const bool skewed = std::any_of(resolved.collectives.begin(), resolved.collectives.end(),
                                    [](const Collective* c) { return c->skewed(); });
    return {
        {"skew", skewed ? nlohmann::json(skew_name(resolved.params.skew)) : nlohmann::json(nullptr)},
        {"skew_seed", skewed ? nlohmann::json(resolved.params.skew.seed) : nlohmann::json(nullptr)},
        {"direction", skewed ? nlohmann::json(direction_name(resolved.params.direction)) : nlohmann::json(nullptr)},
        {"collectives", collectives},
        {"sizes", resolved.sizes},
        {"groups", options.groups.empty() ? nlohmann::json(nullptr) : nlohmann::json(options.groups)},
        {"dtype", resolved.types.size() > 1 ? "all" : dtype_name(resolved.params.type)},
        {"op", resolved.ops.size() > 1 ? "all" : reduce_op_name(resolved.params.op)},
        {"root", resolved.all_roots ? nlohmann::json("all") : nlohmann::json(resolved.params.root)},
        {"placement", placement_name(resolved.placements)},
        {"inplace", resolved.placements.in_place && !resolved.placements.out_of_place},
        {"check", resolved.check_runs > 0},
        {"check_runs", resolved.check_runs},
        {"warmup", resolved.timing.warmup},
        {"iters", resolved.timing.iters},
        {"repeat", options.repeat},
        {"timing", timing_mode_name(resolved.timing.mode)},
        {"batch_size", resolved.timing.mode == TimingMode::batched ? nlohmann::json(resolved.timing.batch_size)
                                                                    : nlohmann::json(nullptr)},
        {"graph", resolved.timing.graph},
        {"buffer_offsets", buffer_offsets_json(resolved.buffer_offsets)},
        {"nonblocking", resolved.timing.nonblocking},
        {"off_cache_bytes", resolved.timing.off_cache_bytes > 0 ? nlohmann::json(resolved.timing.off_cache_bytes)
                                                                : nlohmann::json(nullptr)},
        {"aggregation", aggregation_name(resolved.aggregation)},
        {"reported_statistic", reported_statistic(resolved.aggregation)},
        {"mpi_threads", {{"requested", thread_level_name(resolved.mpi_threads)}}},
        {"timeout_s", options.timeout_s},
        {"min_busbw", resolved.min_busbw ? nlohmann::json(resolved.min_busbw->gbps) : nlohmann::json(nullptr)},
        {"expected", to_json(resolved.expectation)},
        {"background", resolved.background ? nlohmann::json(background_name(*resolved.background)) : nlohmann::json(nullptr)},
        {"backend_requested", options.backend},
        // A planted regression shows in the report it is planted in.
        {"inject_slowdown", options.inject_slowdown < 1.0 ? nlohmann::json(options.inject_slowdown) : nlohmann::json()},
    };
}

std::string method_line(const ResolvedOptions& resolved) {
    std::ostringstream text;
    text << "warm-up " << resolved.timing.warmup << ", " << resolved.timing.iters << " samples per size; ";
    if (resolved.timing.mode == TimingMode::per_iteration)
        text << "per-iteration timing (barrier, start, op, device sync, stop)";
    else
        text << "batched timing (barrier, " << resolved.timing.batch_size << " ops, device sync; time / "
             << resolved.timing.batch_size << ")";
    if (resolved.timing.graph) text << " replaying a CUDA graph";
    if (resolved.timing.nonblocking)
        text << "; non-blocking: each op is the collective's non-blocking call and its wait (IMB-NBC's *_pure)";
    if (resolved.timing.off_cache_bytes > 0)
        text << "; off cache: the calls take turns over buffer copies filling " << resolved.timing.off_cache_bytes
             << " B (IMB's -off_cache)";
    if (resolved.buffer_offsets.size() > 1)
        text << "; buffers past a page per rank (the report's config.buffer_offsets)";
    else if (resolved.buffer_offsets.front().send != 0 || resolved.buffer_offsets.front().recv != 0)
        text << "; send buffer " << resolved.buffer_offsets.front().send << " B, receive buffer "
             << resolved.buffer_offsets.front().recv << " B past a page";
    switch (resolved.aggregation) {
        case Aggregation::max: text << "; each sample is the max over ranks; algbw = bytes / median"; break;
        case Aggregation::mean: text << "; each sample is the mean over ranks; algbw = bytes / median"; break;
        case Aggregation::rank_mean:
            text << "; each rank's mean over samples, then the mean over ranks (IMB t_avg, OSU avg); algbw = "
                    "bytes / that mean";
            break;
        case Aggregation::rank_max:
            text << "; each rank's mean over samples, then the max over ranks (IMB t_max, OSU max); algbw = "
                    "bytes / that max";
            break;
        case Aggregation::rank_min:
            text << "; each rank's mean over samples, then the min over ranks (IMB t_min, OSU min: the fastest rank); "
                    "algbw = bytes / that min";
            break;
        case Aggregation::rank0: text << "; each sample is rank 0's own time; algbw = bytes / median"; break;
    }
    return text.str();
}

// Rounds a requested size down to whole per-rank slices of whole elements, as nccl-tests
// does; for an explicit --size on one collective, refuses instead and names valid sizes.
std::size_t element_count(const Collective& collective, std::uint64_t bytes, const CollectiveParams& params,
                          int nranks, bool exact) {
    const std::uint64_t unit = dtype_size(params.type) * collective.count_multiple(nranks);
    if (exact && bytes % unit != 0) {
        const std::uint64_t below = bytes / unit * unit;
        std::ostringstream text;
        text << "--size " << bytes << " B: " << collective.name() << " of " << dtype_name(params.type) << " over "
             << nranks << " ranks needs a multiple of " << unit << " bytes; the nearest valid sizes are ";
        if (below > 0) text << below << " and ";
        text << below + unit << " bytes";
        throw UsageError(text.str());
    }
    return static_cast<std::size_t>(bytes / unit * collective.count_multiple(nranks));
}

// The flags whose presence matters, not only their value: a flag that does not apply to the
// chosen collective or mode is refused rather than silently ignored.
struct GivenFlags {
    const CLI::Option* root = nullptr;
    const CLI::Option* op = nullptr;
    const CLI::Option* batch_size = nullptr;
    const CLI::Option* json = nullptr;
    const CLI::Option* csv = nullptr;
    const CLI::Option* skew = nullptr;
    const CLI::Option* skew_seed = nullptr;
    const CLI::Option* direction = nullptr;
};

void check_flags_apply(const CollectiveOptions& options, const ResolvedOptions& resolved, const GivenFlags& given) {
    const auto any = [&](auto predicate) {
        return std::any_of(resolved.collectives.begin(), resolved.collectives.end(), predicate);
    };
    if (given.root->count() > 0 && !any([](const Collective* c) { return c->rooted(); }))
        throw UsageError("-r/--root applies to rooted collectives (broadcast, reduce, gather, scatter); " +
                         options.command + " has no root: drop --root");
    if (given.op->count() > 0 && !any([](const Collective* c) { return c->reducing(); }))
        throw UsageError("-o/--op applies to reducing collectives (allreduce, reducescatter, reduce); " + options.command +
                         " moves data without reducing: drop --op");
    for (const CLI::Option* flag : {given.skew, given.skew_seed, given.direction})
        if (flag->count() > 0 && !any([](const Collective* c) { return c->skewed(); }))
            throw UsageError(flag->get_name() + " shapes alltoallv's per-destination blocks; " + options.command +
                             " has none: drop " + flag->get_name());
    if (given.batch_size->count() > 0 && resolved.timing.mode != TimingMode::batched)
        throw UsageError("--batch-size sets the ops per sample of batched timing; add --timing batched or drop "
                         "--batch-size");
    if (given.json->count() > 0 && options.json_path.empty())
        throw UsageError("--json needs a file name (e.g. --json report.json)");
    if (given.csv->count() > 0 && options.csv_path.empty())
        throw UsageError("--csv needs a file name (e.g. --csv report.csv)");
    if (!std::isfinite(options.timeout_s))
        throw UsageError("--timeout must be a finite number of seconds (0: off), not " + std::to_string(options.timeout_s));
    if (same_file(options.json_path, options.csv_path))
        throw UsageError("--json and --csv name the same file '" + options.json_path + "'; give two paths");
}

// The flag that sets the largest size, with its value, for refusals.
std::string size_flag(const CollectiveOptions& options) {
    return options.size ? "--size " + *options.size : "-e/--max-bytes " + options.max_bytes;
}

// What a rank's run holds at most: the buffers of the largest point (buffers only grow during
// a sweep; in the device's memory) and the timing samples (each point's are kept in the
// results and the report; in host memory).
struct CollectiveMemory {
    double send_bytes = 0.0;
    double recv_bytes = 0.0;
    double sample_bytes = 0.0;
};

// `measured_ranks`: the ranks one collective runs over (a --groups group), whose roots -r all takes.
CollectiveMemory collective_memory(const CollectiveOptions& options, const ResolvedOptions& resolved, int nranks,
                                   int measured_ranks, int rank) {
    const std::uint64_t largest = *std::max_element(resolved.sizes.begin(), resolved.sizes.end());
    CollectiveMemory memory;
    std::size_t cases = 0;
    for (const Collective* collective : resolved.collectives)
        for (const CollectiveParams& params : cases_of(*collective, resolved, measured_ranks)) {
            ++cases;
            const double element = static_cast<double>(dtype_size(params.type));
            const std::size_t count = element_count(*collective, largest, params, nranks, false);
            const BufferShape shape = collective->shape(count, nranks, rank, params);
            const BufferOffsets offsets = offsets_of_rank(resolved, rank);
            memory.send_bytes = std::max(memory.send_bytes, options.inplace ? 0.0
                                                                            : static_cast<double>(shape.send_count) * element +
                                                                                  static_cast<double>(offsets.send));
            memory.recv_bytes =
                std::max(memory.recv_bytes, static_cast<double>(options.inplace ? shape.inplace_count : shape.recv_count) *
                                                    element +
                                                static_cast<double>(offsets.recv));
        }
    const double points = static_cast<double>(cases * resolved.sizes.size()) * std::max(options.repeat, 1);
    constexpr double bytes_per_kept_sample = 8.0 + 16.0 + 24.0;  // the double, its JSON value, its text
    memory.sample_bytes = static_cast<double>(resolved.timing.iters) * (2 * 8.0 + points * bytes_per_kept_sample);
    return memory;
}

// Before any allocation: what the run holds against this rank's share of the memory it comes from.
std::optional<std::string> collective_memory_refusal(const CollectiveOptions& options, const ResolvedOptions& resolved,
                                                     const CollectiveMemory& memory, const RunMemoryBudgets& budgets) {
    return placed_memory_refusal(
        {{"send and receive buffers at the largest size", memory.send_bytes + memory.recv_bytes, size_flag(options)}},
        {{"timing samples", memory.sample_bytes, "--iters " + std::to_string(resolved.timing.iters)}}, budgets.device,
        budgets.host, "lower it, or run fewer ranks per host");
}

// The first call of any (type, op, root) case that `data` cannot make (call_arguments_check.hpp):
// each case's types set its counts.
std::optional<std::string> refused_call(Communicator& data, const CollectiveOptions& options,
                                        const ResolvedOptions& resolved, int measured_ranks) {
    for (const Collective* collective : resolved.collectives)
        for (const CollectiveParams& params : cases_of(*collective, resolved, measured_ranks)) {
            std::vector<PlannedPoint> planned;
            for (std::uint64_t requested : resolved.sizes)
                planned.push_back(
                    {collective, element_count(*collective, requested, params, measured_ranks, resolved.exact_size)});
            if (auto refusal = call_arguments_refusal(data, planned, params, size_flag(options))) return refusal;
        }
    return std::nullopt;
}

// nccl-tests' -M 1: what rank 0 holds, in the header.
std::string memory_line(const CollectiveMemory& memory, const std::string& device_kind) {
    std::ostringstream line;
    line << std::fixed << std::setprecision(2) << "# memory (-M 1): rank 0 holds " << memory.send_bytes / 1048576.0
         << " MiB send + " << memory.recv_bytes / 1048576.0 << " MiB receive buffer at the largest size ("
         << device_kind << " memory), " << memory.sample_bytes / 1048576.0 << " MiB of timing samples (host)";
    return line.str();
}

// --groups: every rank's figures for its group reach world rank 0, which records each group
// (its ranks, hosts, time, bandwidths, wrong elements), the minimum bus bandwidth across the
// groups, and counts every group's wrong elements as the point's. Collective over `control`.
void combine_groups(CollectiveResult& result, const GroupLayout& layout, const MpiSession& session,
                    Communicator& control, bool quiet) {
    constexpr std::size_t fields = 4;
    const double mine[fields] = {result.reported_time_us, result.algbw_gbps, result.busbw_gbps,
                                 result.wrong ? static_cast<double>(*result.wrong) : -1.0};
    std::vector<double> all(control.rank() == 0 ? fields * static_cast<std::size_t>(control.size()) : 0);
    control.gather(mine, all.data(), fields, DType::float64, 0);
    if (control.rank() != 0 || result.skipped) return;
    nlohmann::json groups = nlohmann::json::array();
    double min_busbw = 0.0;
    std::uint64_t wrong = 0;
    std::ostringstream line;
    line << std::fixed;
    line.precision(2);
    line << "#   groups:";
    for (std::size_t g = 0; g < layout.groups.size(); ++g) {
        const std::vector<int>& ranks = layout.groups[g];
        const double* figures = all.data() + fields * static_cast<std::size_t>(ranks.front());
        std::vector<std::string> hosts;
        for (int r : ranks) {
            const std::string& host = session.hosts_by_rank()[static_cast<std::size_t>(r)];
            if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
        }
        groups.push_back({{"index", g}, {"ranks", ranks}, {"hosts", hosts}, {"time_us", figures[0]},
                          {"algbw_gbps", figures[1]}, {"busbw_gbps", figures[2]},
                          {"wrong", figures[3] < 0 ? nlohmann::json(nullptr) : nlohmann::json(figures[3])}});
        min_busbw = g == 0 ? figures[2] : std::min(min_busbw, figures[2]);
        if (figures[3] > 0) wrong += static_cast<std::uint64_t>(figures[3]);
        line << " [" << g << "] " << (hosts.size() == 1 ? hosts.front() : std::to_string(hosts.size()) + " hosts")
             << ' ' << figures[2];
    }
    line << " GB/s busbw; min " << min_busbw << '\n';
    if (result.wrong) result.wrong = wrong;
    result.groups = {{"count", layout.groups.size()}, {"busbw_min_gbps", min_busbw}, {"members", groups}};
    if (!quiet) std::cout << line.str() << std::flush;
}

// The console's title of a collective's table: alltoallv's names the distribution of its blocks.
std::string column_title(const Collective& collective, const CollectiveParams& params) {
    std::string title(collective.name());
    if (collective.skewed())
        title += " (--skew " + skew_name(params.skew) + ", seed " + std::to_string(params.skew.seed) +
                 (params.direction == ExchangeDirection::combine
                      ? ", combine; size: each rank's receive buffer, what it sent in the dispatch)"
                      : "; size: each rank's send buffer)");
    return title;
}

// Per-rank totals in bytes, and which rank receives most.
TrafficImbalance traffic_imbalance(const RankTraffic& traffic, std::size_t element) {
    const auto summarize = [element](const std::vector<std::size_t>& counts, TrafficImbalance::Side& side) {
        const auto most = std::max_element(counts.begin(), counts.end());
        side.max_bytes = *most * element;
        side.max_rank = static_cast<int>(most - counts.begin());
        double total = 0.0;
        for (std::size_t c : counts) total += static_cast<double>(c * element);
        side.mean_bytes = total / static_cast<double>(counts.size());
    };
    TrafficImbalance imbalance;
    summarize(traffic.sent, imbalance.sent);
    summarize(traffic.received, imbalance.received);
    return imbalance;
}

// What a point is measured with besides the harness: its verdict, its run under a load.
struct PointAddons {
    const PointJudge& judge;
    BackgroundRunner* background = nullptr;
};

class CollectiveCommand : public Command {
  public:
    explicit CollectiveCommand(std::string name) { options_.command = std::move(name); }
    CollectiveOptions& options() { return options_; }
    GivenFlags& given() { return given_; }

    void validate() const override { check_flags_apply(options_, resolve(options_), given_); }

    int run(Invocation& invocation) override {
        const ResolvedOptions resolved = resolve(options_);
        return run_with_mpi(
            invocation, config_json(options_, resolved),
            [&](const MpiSession& session, Communicator& control) {
                return measure(invocation, resolved, session, control);
            },
            resolved.mpi_threads);
    }

  private:
    // One run, its stages top to bottom: refusals that need the world's size, the backend and the
    // memory check, the header, the harness and its add-ons, the sweeps, the summary and exit.
    int measure(Invocation& invocation, const ResolvedOptions& resolved, const MpiSession& session,
                Communicator& control) {
        const int rank = session.world_rank();
        refuse_for_world(resolved, session.world_size());
        check_outputs_writable(control, {{options_.json_path, "--json"}, {options_.csv_path, "--csv"}});
        const std::optional<GroupLayout> groups =
            resolved.groups ? std::optional(layout_groups(*resolved.groups, session.hosts_by_rank(), rank)) : std::nullopt;
        const std::vector<std::string> hosts = measured_hosts(session, groups);
        const int measured_ranks = static_cast<int>(hosts.size());
        refuse_unmeasurable_points(resolved, measured_ranks);

        // Before the backend: a hang while it starts is watched too; the report kept so far is
        // rewritten as partial by the watchdog's thread as it ends the job.
        KeptReport kept(rank == 0 ? options_.json_path : std::string());
        ProgressLines progress;
        if (rank == 0 && !options_.quiet)
            progress = {options_.progress_s, [](const std::string& line) { write_line(std::cerr, line); }};
        const auto watchdog = start_watchdog(options_.timeout_s, session, control,
                                             [&kept](const std::string& message) { kept.abandon(message); },
                                             std::move(progress));
        watchdog->enter({"setup", "start-up", 0, 0});
        Backend backend = make_run_backend(invocation, resolved.backend, session, control,
                                           options_.nccl_choices ? NcclLogLevel::per_call : NcclLogLevel::init);
        if (options_.nccl_choices && !backend.nccl_log)
            throw UsageError("--nccl-choices reads NCCL's own log; this run uses MPI on host memory: drop it, or run "
                             "on GPUs with --backend nccl");
        NcclRunReport nccl(rank == 0 ? backend.nccl_log.get() : nullptr);
        nccl.read_initialisation();
        const CollectiveMemory memory = checked_memory(resolved, backend, session, control, measured_ranks);
        // With --groups every group is its own job: its harness splits off data and bookkeeping.
        std::unique_ptr<Communicator> group_data = groups ? backend.comm->split(groups->mine, rank) : nullptr;
        std::unique_ptr<Communicator> group_control = groups ? control.split(groups->mine, rank) : nullptr;
        Communicator& data = group_data ? *group_data : *backend.comm;
        Communicator& harness_control = group_control ? *group_control : control;
        throw_if_any_rank_failed(control, refused_call(data, options_, resolved, measured_ranks),
                                 session.hosts_by_rank());
        if (resolved.timing.graph && !backend.device->is_gpu())
            throw UsageError(options_.graph_flag + " replays CUDA graphs; this run uses " + backend.device->kind() +
                             " memory (no GPU visible)");
        const Environment environment = collect_environment(session, *backend.device, *backend.comm, control);
        nlohmann::json report = run_report(invocation, resolved, environment, session);
        if (rank == 0 && !options_.quiet)
            print_run_header(report, resolved, memory, backend.device->kind(), environment, session);

        CollectiveHarness harness(data, harness_control, *backend.device, timing_of_rank(resolved, rank), *watchdog);
        // Before the first point, while nothing else runs: the host measured for --expect-host.
        watchdog->enter({"setup", "measuring this host's links for the expected values", 0, 0});
        PointJudge judge(resolved.expectation, *backend.comm, *backend.device, hosts,
                         *std::max_element(resolved.sizes.begin(), resolved.sizes.end()), oversubscribed(environment),
                         resolved.timing.mode == TimingMode::per_iteration);
        watchdog->idle();
        report["expected_model"] = judge.model_json();
        if (rank == 0 && !options_.quiet && judge.active()) std::cout << (judge.header_line() + '\n') << std::flush;
        Placements placements = resolved.placements;
        placements.verdicts = judge.active();
        placements.full = resolved.full;
        std::optional<BackgroundRunner> background;
        if (resolved.background) background.emplace(*resolved.background, data, harness_control, *backend.device);
        NvtxRange run_range("run " + options_.command);
        watchdog->idle();

        const StopSignals stop(keep_on_stop(kept), stop_linger(rank));
        const RunState run{resolved, session, control, rank, groups, hosts, measured_ranks, *watchdog, kept, nccl, report};
        const std::vector<CollectiveResult> results =
            run_sweeps(run, harness, judge, background ? &*background : nullptr, placements);
        return finish_run(run, results);
    }

    // What the stages of one run share once its backend is up: measure's locals, by reference.
    struct RunState {
        const ResolvedOptions& resolved;
        const MpiSession& session;
        Communicator& control;
        int rank;
        const std::optional<GroupLayout>& groups;
        const std::vector<std::string>& hosts;  // of the ranks one harness measures
        int measured_ranks;
        Watchdog& watchdog;
        KeptReport& kept;
        NcclRunReport& nccl;
        nlohmann::json& report;
    };

    // The flags that name ranks, against the ranks the job has.
    static void refuse_for_world(const ResolvedOptions& resolved, int nranks) {
        if (!resolved.all_roots && resolved.params.root >= nranks)
            throw UsageError("--root " + std::to_string(resolved.params.root) + ": only " + std::to_string(nranks) +
                             " ranks; use 0.." + std::to_string(nranks - 1) + " (or all)");
        if (resolved.buffer_offsets.size() > 1 && resolved.buffer_offsets.size() != static_cast<std::size_t>(nranks))
            throw UsageError("--buffer-offsets gives " + std::to_string(resolved.buffer_offsets.size()) +
                             " pairs for " + std::to_string(nranks) +
                             " ranks; give one SEND,RECV for every rank or one pair per rank");
    }

    // The hosts of the ranks one harness measures: the world's, or with --groups this rank's group's.
    static std::vector<std::string> measured_hosts(const MpiSession& session, const std::optional<GroupLayout>& groups) {
        if (!groups) return session.hosts_by_rank();
        std::vector<std::string> hosts;
        for (int member : groups->groups[static_cast<std::size_t>(groups->mine)])
            hosts.push_back(session.hosts_by_rank()[static_cast<std::size_t>(member)]);
        return hosts;
    }

    // A skew the measured ranks cannot take, and exact sizes no count of elements makes, refused
    // before any measuring.
    static void refuse_unmeasurable_points(const ResolvedOptions& resolved, int measured_ranks) {
        for (const Collective* collective : resolved.collectives)
            if (collective->skewed())
                if (auto refusal = skew_refusal(resolved.params.skew, measured_ranks)) throw UsageError(*refusal);
        for (const Collective* collective : resolved.collectives)
            for (const CollectiveParams& params : cases_of(*collective, resolved, measured_ranks))
                element_count(*collective, resolved.sizes.front(), params, measured_ranks, resolved.exact_size);
    }

    // The run's buffers, refused on every rank alike when they do not fit (once the device is
    // known: a GPU's free memory is checked too), before any buffer is allocated.
    CollectiveMemory checked_memory(const ResolvedOptions& resolved, const Backend& backend, const MpiSession& session,
                                    Communicator& control, int measured_ranks) const {
        const CollectiveMemory memory =
            collective_memory(options_, resolved, session.world_size(), measured_ranks, session.world_rank());
        throw_if_any_rank_failed(
            control,
            collective_memory_refusal(options_, resolved, memory,
                                      run_memory_budgets(*backend.device, control, session.hosts_by_rank(),
                                                         session.local_size())),
            session.hosts_by_rank());
        return memory;
    }

    // The report's frame: what was asked, on what, with the MPI thread level obtained.
    nlohmann::json run_report(const Invocation& invocation, const ResolvedOptions& resolved,
                              const Environment& environment, const MpiSession& session) const {
        nlohmann::json config = config_json(options_, resolved);
        config["mpi_threads"]["provided"] = thread_level_name(session.thread_level_provided());
        return report_frame(options_.command, invocation.arguments, invocation.started_at, environment, config);
    }

    // The console's "# ..." header, and the warnings about the run's setting.
    void print_run_header(const nlohmann::json& report, const ResolvedOptions& resolved, const CollectiveMemory& memory,
                          const std::string& device_kind, const Environment& environment,
                          const MpiSession& session) const {
        print_console_header(std::cout, report, method_line(resolved));
        for (const std::string& translation : resolved.nccl_tests_translations)
            write_line(std::cout, "# nccl-tests flag " + translation);
        if (resolved.memory_report) write_line(std::cout, memory_line(memory, device_kind));
        if (oversubscribed(environment))
            std::cerr << "warning: more ranks than cores on a host: ranks share cores and busy-poll, so times "
                         "measure the scheduler too; quote figures from runs with at most one rank per core\n";
        if (session.thread_level_provided() != session.thread_level_requested())
            write_line(std::cerr, "warning: asked MPI for thread level " +
                                      std::string(thread_level_name(session.thread_level_requested())) +
                                      ", it provides " + std::string(thread_level_name(session.thread_level_provided())) +
                                      " (OMPI_MPI_THREAD_LEVEL set?); higher levels cost small messages latency");
    }

    // Ctrl-C (SIGTERM from mpirun) or a SIGTERM of its own: the report says so; under --repeat 0,
    // the way such a run ends, it is complete with the sweeps it has.
    std::function<void(const std::string&)> keep_on_stop(KeptReport& kept) const {
        return [&kept, repeat = options_.repeat](const std::string& signal) {
            if (repeat != 0) return kept.abandon(signal + " stopped the run");
            kept.conclude([&signal](nlohmann::json& document) {
                set_status(document, RunStatus::complete);
                document["finished_at"] = utc_now_iso8601();
                document["repetitions"]["ended_by"] = signal;
            });
        };
    }

    // The timing options with this rank's buffer offsets.
    static TimingOptions timing_of_rank(const ResolvedOptions& resolved, int rank) {
        TimingOptions timing = resolved.timing;
        const BufferOffsets offsets = offsets_of_rank(resolved, rank);
        timing.send_offset_bytes = offsets.send;
        timing.recv_offset_bytes = offsets.recv;
        return timing;
    }

    // Every sweep's rows, each published as it finishes.
    std::vector<CollectiveResult> run_sweeps(const RunState& run, CollectiveHarness& harness, PointJudge& judge,
                                             BackgroundRunner* background, const Placements& placements) {
        std::vector<CollectiveResult> results;
        std::size_t points = 0;
        for (const Collective* collective : run.resolved.collectives)
            points += cases_of(*collective, run.resolved, run.measured_ranks).size() * run.resolved.sizes.size() *
                      (run.resolved.placements.in_place && run.resolved.placements.out_of_place ? 2 : 1);
        points_per_sweep_ = points;
        std::optional<CollectiveResult> halves[2];  // the row being measured: out of place, in place
        SweepSteps steps;
        steps.cases = [&](const Collective& collective) {
            return cases_of(collective, run.resolved, run.measured_ranks);
        };
        steps.begin_collective = [&](const Collective& collective, int sweep) {
            if (run.rank == 0 && !options_.quiet) print_collective_columns(run, harness, placements, collective, sweep);
        };
        steps.measure = [&](const SweepPoint& point) {
            halves[point.inplace] = measure_in_run(run, harness, judge, background, point);
            results.push_back(*halves[point.inplace]);
        };
        steps.end_row = [&]() {
            if (run.nccl.active()) run.report["nccl"] = run.nccl.to_json();
            if (run.rank == 0)
                publish(results, run.report, placements, halves[0], halves[1], run.kept,
                        std::to_string(results.size()) + " of " +
                            (options_.repeat > 0 ? std::to_string(points * static_cast<std::size_t>(options_.repeat))
                                                 : std::string("as many as run until stopped")) +
                            " points measured (the run is going on, or it ended before the rest)");
            halves[0].reset();
            halves[1].reset();
        };
        run_sweep(run.resolved.collectives, run.resolved.sizes,
                  {run.resolved.placements.out_of_place, run.resolved.placements.in_place}, options_.repeat, steps);
        return results;
    }

    // A collective's column titles (with the sweep's number under --repeat) and its one-rank note.
    void print_collective_columns(const RunState& run, CollectiveHarness& harness, const Placements& placements,
                                  const Collective& collective, int sweep) const {
        const bool repeated = options_.repeat != 1;
        print_console_columns(std::cout,
                              column_title(collective, run.resolved.params) +
                                  (repeated ? "; sweep " + std::to_string(sweep) +
                                                  (options_.repeat > 0 ? " of " + std::to_string(options_.repeat)
                                                                       : " (until stopped)")
                                            : ""),
                              placements, reported_statistic(run.resolved.aggregation));
        if (const auto shortcut =
                one_rank_shortcut(collective, harness.data().backend(), harness.data().size(), run.resolved.params))
            std::cout << "# " << *shortcut << '\n';
    }

    // One half of a row: the groups started together, the point measured, NCCL's choice, the
    // groups' figures combined.
    CollectiveResult measure_in_run(const RunState& run, CollectiveHarness& harness, PointJudge& judge,
                                    BackgroundRunner* background, const SweepPoint& point) const {
        if (run.groups) {  // the groups start each point together
            run.watchdog.enter({"setup", "groups starting a point", point.requested_bytes, 0});
            run.control.barrier();
            run.watchdog.idle();
        }
        judge.set_transport_note(run.nccl.transport_note());
        CollectiveResult half = measure_point(harness, *point.collective, *point.params, point.requested_bytes,
                                              point.inplace, run.resolved, run.measured_ranks, run.hosts, {judge, background});
        if (run.nccl.active()) half.extra["nccl_choice"] = run.nccl.point_choice(std::string(point.collective->name()));
        if (run.groups) {
            run.watchdog.enter({"results", "gathering group figures", point.requested_bytes, 0});
            combine_groups(half, *run.groups, run.session, run.control, options_.quiet);
            run.watchdog.idle();
        }
        if (options_.repeat != 1) half.repetition = point.sweep;
        return half;
    }

    // The summary, the gates (--min-busbw, --min-ratio), the last report and the exit status,
    // the same on every rank.
    int finish_run(const RunState& run, const std::vector<CollectiveResult>& results) const {
        const RunSummary summary = summarize_run(results, run.resolved.check_runs > 0);
        std::optional<std::string> below_gate = busbw_gate_failure(summary, run.resolved.min_busbw);
        if (!below_gate) below_gate = min_ratio_failure(results, run.resolved.expectation.min_ratio);
        if (run.rank == 0) {
            run.report["finished_at"] = utc_now_iso8601();
            run.report["summary"] = to_json(summary);
            if (summary.wrong_total > 0)
                write_reports(results, run.report, run.kept, RunStatus::failed,
                              std::to_string(summary.wrong_total) + " elements were wrong (see wrong per point)");
            else if (below_gate)
                write_reports(results, run.report, run.kept, RunStatus::failed, *below_gate);
            else
                write_reports(results, run.report, run.kept, RunStatus::complete);
            close_console(summary, run.resolved, below_gate, results);
            if (run.nccl.active() && !options_.quiet) {
                write_line(std::cout, run.nccl.header_line());
                for (const NcclWarning& warning : run.nccl.warnings()) write_line(std::cerr, "warning: " + warning.text);
            }
        }
        // The gate is the first rank's verdict (with --groups each rank's summary is its group's),
        // so that every rank exits alike.
        int gate_failed = run.rank == 0 && below_gate ? 1 : 0;
        run.control.broadcast(&gate_failed, &gate_failed, 1, DType::int32, 0);
        return summary.wrong_total > 0 || gate_failed != 0 ? 1 : 0;
    }

    // The summary lines, the tally of warnings (each point's under --verbose) and the error.
    void close_console(const RunSummary& summary, const ResolvedOptions& resolved,
                       const std::optional<std::string>& below_gate, const std::vector<CollectiveResult>& results) const {
        if (!options_.quiet) {
            print_console_summary(std::cout, summary,
                                  resolved.min_busbw ? std::optional(resolved.min_busbw->gbps) : std::nullopt);
            std::cout << std::flush;
            if (const auto tally = warning_tally(summary)) {
                write_line(std::cerr, "warning: " + *tally +
                                          (options_.verbose ? "" : " (--verbose prints each; the JSON report has them all)"));
            }
            if (summary.straggler_warning) write_line(std::cerr, "warning: " + *summary.straggler_warning);
            if (const auto spread = spread_line(repetition_spreads(results), results.size() / points_per_sweep_))
                std::cout << *spread << '\n' << std::flush;
            if (summary.warning_points.count("page-faults") > 0) write_line(std::cerr, "hint: " + page_fault_hint());
        }
        if (summary.wrong_total > 0)
            std::cerr << ("error: " + std::to_string(summary.wrong_total) +
                          " elements were wrong: the collective returned incorrect data (see #wrong)\n");
        if (below_gate) write_line(std::cerr, "error: " + *below_gate);
    }

    CollectiveResult measure_point(CollectiveHarness& harness, const Collective& collective, const CollectiveParams& params,
                                   std::uint64_t requested, bool inplace, const ResolvedOptions& resolved, int nranks,
                                   const std::vector<std::string>& hosts, const PointAddons& addons) const {
        CollectiveResult result;
        result.collective = std::string(collective.name());
        result.requested_bytes = requested;
        result.dtype = params.type;
        if (collective.reducing()) result.op = params.op;
        if (collective.rooted()) result.root = params.root;
        result.inplace = inplace;
        if (collective.skewed())
            result.skew = SkewUsed{skew_name(params.skew), params.skew.seed, direction_name(params.direction)};
        result.aggregation = resolved.aggregation;
        result.one_rank_shortcut =
            one_rank_shortcut(collective, harness.data().backend(), harness.data().size(), params);
        result.bus_factor = point_bus_factor(collective, nranks, result.one_rank_shortcut.has_value());
        result.count = element_count(collective, requested, params, nranks, resolved.exact_size);
        result.bytes = result.count * dtype_size(params.type);
        if (result.count == 0) {
            result.skipped = "smaller than one " + std::string(dtype_name(params.type)) + " per rank";
            return result;
        }
        if (inplace && !collective.supports_inplace()) {
            result.skipped = "no in-place form (" + std::string(collective.no_inplace_reason()) + ")";
            return result;
        }
        if (inplace && resolved.timing.nonblocking && !collective.nonblocking_inplace()) {
            result.skipped = "no non-blocking in-place form (the MPI backend's non-blocking reduce-scatter runs out of "
                             "place only)";
            return result;
        }
        if (collective.rooted() && !inplace && !collective.root_output_written(harness.data()))
            result.placement_note = "out of place on MPI: the root sends from its input buffer (MPI_Bcast has one "
                                    "buffer); its output buffer is not written";
        if (const auto traffic = collective.rank_traffic(result.count, nranks, params))
            result.imbalance = traffic_imbalance(*traffic, dtype_size(params.type));
        PointSpec spec{&collective, result.count, params, inplace, resolved.check_runs > 0, resolved.check_runs};
        PointMeasurement measurement = measure_or_name_buffers(harness, spec, result.bytes);
        result.wrong = measurement.wrong;
        derive_statistics(result, measurement.times, hosts);
        add_thread_counters(result, std::move(measurement.counters_by_rank), measurement.calls_per_rank);
        addons.judge.judge(result, collective, params);
        if (addons.background)
            addons.background->measure_under_load(
                harness, spec, result, hosts,
                resolved.timing.iters * (resolved.timing.mode == TimingMode::batched ? resolved.timing.batch_size : 1));
        return result;
    }

    // An allocation that fails despite the estimate names the buffers (bench/collective_sweep.hpp)
    // and the flag sizing them, by the failure's kind.
    PointMeasurement measure_or_name_buffers(CollectiveHarness& harness, const PointSpec& spec,
                                             std::uint64_t bytes) const {
        try {
            return measure_sweep_point(harness, spec, bytes);
        } catch (const PointFailure& failure) {
            const std::string flag = options_.size ? "--size" : "-e/--max-bytes";
            switch (failure.kind()) {
                case PointFailureKind::device_allocation:
                    throw RuntimeFailure(std::string(failure.what()) + "; they are sized by " + flag + ": lower it");
                case PointFailureKind::host_memory:
                    throw RuntimeFailure(std::string(failure.what()) + "; they are sized by " + flag +
                                         " (and the samples by --iters)");
            }
            throw;
        }
    }

    void publish(const std::vector<CollectiveResult>& results, nlohmann::json& report, Placements placements,
                 const std::optional<CollectiveResult>& out_of_place, const std::optional<CollectiveResult>& in_place,
                 KeptReport& kept, const std::string& progress) const {
        if (!options_.quiet) {
            print_console_row(std::cout, placements, out_of_place ? &*out_of_place : nullptr,
                              in_place ? &*in_place : nullptr);
            for (const auto* half : {&out_of_place, &in_place})
                if (*half && !background_line(**half).empty()) std::cout << (background_line(**half) + '\n');
            std::cout << std::flush;
        }
        if (options_.verbose)
            for (const auto* half : {&out_of_place, &in_place})
                if (*half)
                    for (const Warning& warning : (*half)->warnings)
                        write_line(std::cerr, "warning: " + (*half)->collective + ' ' + std::to_string((*half)->bytes) +
                                                  " B " + ((*half)->inplace ? "in-place" : "out-of-place") + ": " +
                                                  warning.text);
        write_reports(results, report, kept, RunStatus::partial, progress);
    }

    void write_reports(const std::vector<CollectiveResult>& results, nlohmann::json& report, KeptReport& kept,
                       RunStatus status, const std::string& reason = {}) const {
        nlohmann::json entries = nlohmann::json::array();
        for (const CollectiveResult& r : results) entries.push_back(to_json(r));
        report["results"] = std::move(entries);
        if (options_.repeat != 1) report["repetitions"] = repetitions_json(results, options_.repeat, points_per_sweep_);
        kept.write(report, status, reason);
        if (!options_.csv_path.empty()) write_text_atomically(options_.csv_path, to_csv(results));
    }

    CollectiveOptions options_;
    GivenFlags given_;
    std::size_t points_per_sweep_ = 0;  // set when the run starts measuring
};

void add_reporting_flags(CLI::App& sub, CollectiveOptions& o) {
    sub.add_option("--placement", o.placement, "out, in or both: out-of-place and in-place halves of each row")
        ->capture_default_str();
    sub.add_flag("--inplace", o.inplace, "Shorthand for --placement in (NCCL's in-place layout)");
    sub.add_option("-c,--check", o.check,
                   "Validate every element after timing (the default: one run per size); N: N validated runs per size, "
                   "as nccl-tests' -c N (-c 0: none)")
        ->expected(0, 1);
    sub.add_flag("--no-check", o.no_check, "Skip validation (#wrong is N/A)");
    sub.add_option("--aggregate", o.aggregate,
                   "Over ranks: max (per-iteration slowest), mean, rank-mean (IMB t_avg, OSU avg), rank-max (IMB t_max), "
                   "rank-min (IMB t_min) or rank0")
        ->capture_default_str();
    sub.add_flag("--full", o.full,
                 "OSU's full statistics: t_min and t_max columns (the fastest and slowest rank's mean time, and which "
                 "rank) and p95 (the 95th-percentile sample and the rank slowest in it)");
    sub.add_option("--mpi-threads", o.mpi_threads, "MPI thread level: single (MPI_Init), funneled or multiple")
        ->capture_default_str();
    sub.add_flag("-v,--verbose", o.verbose, "Print every point's warnings as it finishes (else one tally)");
    sub.add_flag("-q,--quiet", o.quiet, "Print errors only (no table, summary or warnings)");
}

// nccl-tests' own flags (cli/nccl_tests_flags.hpp) set the parbench options they mean; one that
// is also given under parbench's name with another value is refused.
void apply_nccl_tests_flags(CollectiveOptions& o, const CLI::App& sub) {
    const NcclTestsMeaning meaning = nccl_tests_meaning(o.nccl_tests);
    const auto take = [&sub](const std::string& nccl_flag, const std::string& flag, auto& field, const auto& value) {
        if (sub.get_option(flag)->count() > 0 && field != value)
            throw UsageError(nccl_flag + " and " + flag + " both given, and they differ; keep one");
        field = value;
    };
    if (meaning.timing) take("-m/-z", "--timing", o.timing, *meaning.timing);
    if (meaning.batch_size) take("-m", "--batch-size", o.batch_size, *meaning.batch_size);
    if (meaning.aggregate) take("-a", "--aggregate", o.aggregate, *meaning.aggregate);
    if (meaning.json_path) take("-J", "--json", o.json_path, *meaning.json_path);
    if (meaning.graph) {
        o.graph = true;
        o.graph_flag = "-G (nccl-tests' --cudagraph)";
    }
    if (meaning.full_statistics) o.full = true;
    if (meaning.repeat) take("-N", "--repeat", o.repeat, *meaning.repeat);
    o.unalign_elements = meaning.unalign_elements;
    o.memory_report = meaning.memory_report;
    o.nccl_tests_translations = meaning.translations;
}

// CLI11 leaves options of the empty group out of --help; they are still accepted.
constexpr const char* hidden = "";

std::string description(const std::string& name) {
    if (name == "all") return "Time every collective in turn";
    if (name == "sendrecv") return "Time a ring of send/recv pairs (rank r sends to r+1, receives from r-1)";
    return "Time " + name;
}

// add_collective_command's groups of flags, in the order --help lists them.

// The sizes (one, or a sweep with nccl-tests' names too: cli/nccl_tests_flags.hpp) and the type.
void add_size_flags(CLI::App& sub, CollectiveOptions& o) {
    auto* size = sub.add_option("--size", o.size, "One size, e.g. 100M (binary suffixes K M G)");
    auto* min = sub.add_option("-b,--min-bytes,--minbytes", o.min_bytes, "Smallest size of a sweep")->capture_default_str();
    auto* max = sub.add_option("-e,--max-bytes,--maxbytes", o.max_bytes, "Largest size of a sweep")->capture_default_str();
    auto* factor = sub.add_option("-f,--step-factor,--stepfactor", o.step_factor,
                                  "Multiply the size by this each step (default 2, unless -i is given alone)");
    auto* step = sub.add_option("-i,--step-bytes,--stepbytes", o.step_bytes,
                                "Add this to the size each step instead (nccl-tests' -i; a factor above 1 wins)");
    size->excludes(min)->excludes(max)->excludes(factor)->excludes(step);
    sub.add_option("-d,--dtype,--datatype", o.dtype,
                   "float32 float64 float16 bfloat16 int8 uint8 int32 uint32 int64 uint64, or all (each in turn); "
                   "nccl-tests' half, float, double too")
        ->capture_default_str();
}

// --op and --root are listed by the commands they apply to; the others still accept them,
// hidden, to refuse them with a message saying why (check_flags_apply).
void add_op_and_root_flags(CLI::App& sub, CollectiveOptions& o, GivenFlags& given, const std::string& name) {
    const bool reducing = name == "all" || find_collective(name)->reducing();
    const bool rooted = name == "all" || find_collective(name)->rooted();
    CLI::Option* op =
        sub.add_option("-o,--op", o.op, "Reduction: sum prod max min avg, or all (each in turn)")->capture_default_str();
    CLI::Option* root =
        sub.add_option("-r,--root", o.root, "Root rank of broadcast, reduce, gather, scatter, or all (each in turn)")
            ->capture_default_str();
    if (!reducing) op->group(hidden);
    if (!rooted) root->group(hidden);
    given.op = op;
    given.root = root;
}

// How each size is timed: iterations, repeats, timing mode, graphs, NCCL's choices, buffer offsets.
void add_timing_flags(CLI::App& sub, CollectiveOptions& o, GivenFlags& given) {
    sub.add_option("-w,--warmup,--warmup_iters", o.warmup, "Untimed iterations before timing")->capture_default_str();
    sub.add_option("-n,--iters", o.iters, "Timed samples per size")->capture_default_str();
    sub.add_option("--repeat", o.repeat,
                   "Run the whole sweep this many times (nccl-tests' -N); the report holds every sweep and the spread "
                   "between them, which compare takes as run-to-run noise. 0: until SIGINT/SIGTERM, which end it "
                   "keeping the report")
        ->capture_default_str();
    sub.add_option("--timing", o.timing, "per-iter (barrier + sync around each op) or batched")->capture_default_str();
    given.batch_size = sub.add_option("--batch-size", o.batch_size, "Ops per sample in batched timing")->capture_default_str();
    sub.add_flag("--graph", o.graph, "Replay the op(s) of a sample from a CUDA graph (GPU only)");
    sub.add_flag("--nccl-choices", o.nccl_choices,
                 "NCCL backend: record each point's algorithm, protocol and channels from NCCL's per-call tuning log "
                 "(rank 0 then writes a log line inside every timed call)");
    sub.add_option("--buffer-offsets", o.buffer_offsets,
                   "SEND[,RECV]: start the send and receive buffers this many bytes past a page (default 0,0); "
                   "SEND,RECV:SEND,RECV...: one pair per rank (docs/reproducing.md: IMB-MPI1's placement)");
    sub.add_flag("--nonblocking", o.nonblocking,
                 "Time the non-blocking form (allreduce, allgather, reducescatter): the MPI_I* call, then its wait, as "
                 "IMB-NBC's Iallreduce_pure etc. (no compute between them); reducescatter out of place only");
    sub.add_option("--off-cache", o.off_cache,
                   "SIZE (e.g. 64M, at least the last-level cache): IMB-MPI1's -off_cache; the calls take turns over "
                   "copies of the buffers that fill SIZE, so each finds its buffers out of cache, as between a "
                   "training step's compute (default: one pair, hot)");
}

// A load beside each point, and alltoallv's traffic pattern.
void add_load_and_skew_flags(CLI::App& sub, CollectiveOptions& o, GivenFlags& given) {
    sub.add_option("--background", o.background,
                   "Measure every point again under a load on every rank: gemm[:N], stream[:BYTES] or "
                   "collective[:BYTES] (a second communicator); each row reports both times, the slowdown and the "
                   "load's throughput without and with the collective");
    given.skew = sub.add_option("--skew", o.skew,
                                "alltoallv's per-destination blocks: uniform, zipf:S (destination p of the seeded "
                                "popularity order weighs 1/(p+1)^S) or hot:K (K destinations get 90% of the traffic); "
                                "docs/collectives.md")
                     ->capture_default_str();
    given.skew_seed =
        sub.add_option("--skew-seed", o.skew_seed, "Seed of the popularity order --skew follows (same on every rank)")
            ->capture_default_str();
    given.direction =
        sub.add_option("--direction", o.direction,
                       "alltoallv: dispatch (each rank sends its blocks out) or combine (the transpose: each "
                       "destination sends them back, as an MoE layer returns the experts' outputs)")
            ->capture_default_str();
}

// Reports, backend and buffers, groups, and the run's limits.
void add_output_and_run_flags(CLI::App& sub, CollectiveOptions& o, GivenFlags& given) {
    given.json = sub.add_option("--json", o.json_path, "Write the report as JSON (schema parbench.report/v1)");
    given.csv = sub.add_option("--csv", o.csv_path, "Write the results as CSV");
    sub.add_option("--backend", o.backend, "auto (NCCL when every rank sees a GPU), mpi or nccl")->capture_default_str();
    add_buffer_pages_flag(sub);
    sub.add_option("--groups", o.groups,
                   "Run the collective in concurrent groups: host (one per host), cross-host (one per local rank) "
                   "or N (consecutive ranks); busbw per group and the minimum");
    sub.add_option("-T,--timeout", o.timeout_s, "Abort the job when one step hangs this many seconds (0: off)")
        ->capture_default_str();
    sub.add_option("--progress", o.progress_s,
                   "When one size runs this many seconds, say on stderr which iteration it is in, and again "
                   "every as many seconds (0: never)")
        ->capture_default_str();
    sub.add_option("--min-busbw", o.min_busbw,
                   "Fail the run (exit 1) when its average busbw is below this many GB/s, as nccl-tests' "
                   "NCCL_TESTS_MIN_BW (read when this flag is not given)");
}

// Fault injection, for the tests (hidden from --help).
void add_fault_injection_flags(CLI::App& sub, CollectiveOptions& o) {
    sub.add_option("--inject-hang", o.inject_hang_rank,
                   "Fault injection: this rank stops in its first timed iteration (tests --timeout)")
        ->group(hidden);
    sub.add_option("--inject-straggler", o.inject_straggler_rank,
                   "Fault injection: this rank sleeps after each barrier before the op (tests straggler naming)")
        ->group(hidden);
    sub.add_option("--inject-slowdown", o.inject_slowdown,
                   "Fault injection: every rank stretches each timed op so busbw reads about this fraction of what "
                   "it would (tests compare's gate)")
        ->group(hidden);  // also scripts/bench/bench_compare_gate.sh's
    sub.add_option("--inject-straggler-us", o.inject_straggler_us, "How long --inject-straggler sleeps (us)")
        ->capture_default_str()
        ->group(hidden);
}

}  // namespace

std::unique_ptr<Command> add_collective_command(CLI::App& app, const std::string& name) {
    auto command = std::make_unique<CollectiveCommand>(name);
    CollectiveOptions& o = command->options();
    CLI::App* sub = app.add_subcommand(name, description(name));
    add_size_flags(*sub, o);
    add_op_and_root_flags(*sub, o, command->given(), name);
    add_timing_flags(*sub, o, command->given());
    add_reporting_flags(*sub, o);
    add_expectation_flags(*sub, o.expectation);
    add_load_and_skew_flags(*sub, o, command->given());
    add_output_and_run_flags(*sub, o, command->given());
    add_fault_injection_flags(*sub, o);
    add_nccl_tests_flags(*sub, o.nccl_tests);
    sub->parse_complete_callback([&o, sub] { apply_nccl_tests_flags(o, *sub); });
    return command;
}

}  // namespace parbench
