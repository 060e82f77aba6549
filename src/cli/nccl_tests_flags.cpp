#include "cli/nccl_tests_flags.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace parbench {
namespace {

struct FlagSpec {
    const char* names;  // as CLI11 takes them
    const char* key;    // nccl-tests' long name
    const char* help;
};

// nccl-tests' own flags, in its usage text's order.
constexpr std::array<FlagSpec, 20> specs{{
    {"-t,--nthreads", "nthreads", "Threads per process: 1 (parbench runs one rank per process; launch more ranks)"},
    {"-g,--ngpus", "ngpus", "GPUs per thread: 1 (one GPU per rank; launch one rank per GPU)"},
    {"-m,--agg_iters", "agg_iters", "Ops per sample: N > 1 is --timing batched --batch-size N"},
    {"-N,--run_cycles", "run_cycles", "--repeat N: the whole sweep N times in one report (0: until stopped)"},
    {"-p,--parallel_init", "parallel_init", "0 or 1: no effect (one thread per process initialises its communicator)"},
    {"-z,--blocking", "blocking", "0: as parbench times; 1 or 3: --timing per-iter (with -m N > 1, -z 3 is --timing batched)"},
    {"-y,--stream_null", "stream_null", "0 only: parbench runs on its own stream"},
    {"-G,--cudagraph", "cudagraph", "N > 0: --graph (replay each sample's ops from a CUDA graph; GPU only)"},
    {"-C,--report_cputime", "report_cputime", "0 only: parbench reports device time"},
    {"-S,--report_timestamps", "report_timestamps", "0 only: the report has started_at and finished_at"},
    {"-J,--output_file", "output_file", "--json FILE (parbench's report, schemas/report.schema.json)"},
    {"-a,--average", "average", "0: --aggregate rank0, 1: rank-mean, 2: rank-min, 3: rank-max"},
    {"-R,--local_register", "local_register", "0 only: parbench does not register buffers with NCCL"},
    {"-x,--cta_policy", "cta_policy", "Not taken: parbench leaves NCCL's CTA policy at its default"},
    {"-D,--device_implementation", "device_implementation", "0 only: parbench calls NCCL's host API"},
    {"-V,--device_cta_count", "device_cta_count", "Not taken: only for -D > 0"},
    {"-M,--memory", "memory", "1: print each rank's buffer memory before the sweep"},
    {"-u,--unalign", "unalign", "N: misalign both buffers by N elements (--buffer-offsets N x element size)"},
    {"-I,--per_iter_timing", "per_iter_timing", "1: --full (min, max and p95 columns; parbench always times per iteration)"},
    {"-K,--per_iter_skip", "per_iter_skip", "0 only: raise -w/--warmup to leave leading samples out"},
}};

std::string flag_of(std::string_view key) {
    for (const FlagSpec& spec : specs)
        if (spec.key == key) {
            const std::string names = spec.names;
            return names.substr(0, names.find(',')) + " (--" + std::string(key) + ")";
        }
    return std::string(key);
}

// nccl-tests reads its numbers with strtol; a script's values are whole numbers.
long whole_number(std::string_view key, const std::string& text) {
    const bool digits = !text.empty() && text.size() <= 9 &&
                        std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!digits) throw UsageError(flag_of(key) + " '" + text + "': give a whole number, as nccl-tests takes it");
    return std::stol(text);
}

// A flag parbench takes only at nccl-tests' default (or a value that changes nothing there): any
// value above `accepted_up_to` is refused with `instead`; without a limit, any value at all.
struct DefaultOnly {
    const char* key;
    std::optional<long> accepted_up_to;
    const char* instead;
};

// In the order they are checked (nccl-tests' usage order, the two not taken at all last).
const std::array<DefaultOnly, 11> default_only{{
    {"nthreads", 1,
     "parbench runs one rank per process, one GPU each; launch that many more ranks (mpirun -np <processes "
     "x threads>) and drop -t"},
    {"ngpus", 1,
     "parbench drives one GPU per rank; launch one rank per GPU (mpirun -np <GPUs>, or "
     "scripts/run.sh, which does) and drop -g"},
    {"parallel_init", 1, "give 0 or 1 (with one thread per process both initialise alike)"},
    {"stream_null", 0, "parbench launches on its own stream, never the NULL stream; drop -y"},
    {"report_cputime", 0,
     "parbench reports the device's time (CUDA events on GPUs, the steady clock on CPUs), not CPU time; "
     "drop -C"},
    {"report_timestamps", 0,
     "the report has started_at and finished_at, and --json is rewritten after every point; drop -S"},
    {"local_register", 0,
     "parbench does not register buffers with NCCL (ncclCommRegister, symmetric memory); drop -R to time "
     "unregistered buffers"},
    {"device_implementation", 0, "parbench calls NCCL's host API, not a device-side implementation; drop -D"},
    {"per_iter_skip", 0, "parbench's samples all follow the warm-up; raise -w/--warmup by that many instead of -K"},
    {"cta_policy", std::nullopt,
     "parbench leaves NCCL's CTA policy at its default; drop -x (NCCL_CTA_POLICY in the "
     "environment sets it for NCCL itself)"},
    {"device_cta_count", std::nullopt,
     "it sizes nccl-tests' device implementation (-D), which parbench has not; drop -V"},
}};

void refuse_untaken_values(const std::map<std::string, std::string>& given) {
    for (const DefaultOnly& flag : default_only) {
        const auto found = given.find(flag.key);
        if (found == given.end()) continue;
        if (!flag.accepted_up_to || whole_number(flag.key, found->second) > *flag.accepted_up_to)
            throw UsageError(flag_of(flag.key) + " " + found->second + ": " + flag.instead);
    }
}

// nccl_tests_meaning's state: the flags given, and what they have been found to mean so far.
struct Translation {
    const std::map<std::string, std::string>& given;
    NcclTestsMeaning meaning;

    std::optional<long> value_of(const char* key) const {
        const auto found = given.find(key);
        if (found == given.end()) return std::nullopt;
        return whole_number(key, found->second);
    }
    void note(const char* key, const std::string& means) {
        meaning.translations.push_back(flag_of(key).substr(0, flag_of(key).find(' ')) + " " + given.at(key) + ": " +
                                       means);
    }
};

// -m and -z: ops back to back per sample (batched timing) or each op timed alone (per-iter).
void translate_timing(Translation& t) {
    const std::optional<long> aggregated = t.value_of("agg_iters");
    const std::optional<long> blocking = t.value_of("blocking");
    if (aggregated && *aggregated < 1) throw UsageError("-m (--agg_iters) " + t.given.at("agg_iters") + ": give 1 or more ops per sample");
    const bool batched = aggregated && *aggregated > 1;
    if (batched) {
        t.meaning.batch_size = static_cast<int>(*aggregated);
        t.meaning.timing = "batched";
        t.note("agg_iters", "--timing batched --batch-size " + t.given.at("agg_iters") +
                              " (each sample: a barrier, the ops back to back, one sync; time / ops)");
    }
    if (blocking) {
        if (*blocking == 2 || *blocking > 3)
            throw UsageError("-z (--blocking) " + t.given.at("blocking") +
                             ": parbench's samples start at a barrier and end at a device sync; use -z 1 or -z 3 "
                             "(--timing per-iter), or -m N for ops back to back");
        if (*blocking == 1 && batched)
            throw UsageError("-z 1 makes each of -m's ops wait and barrier, undoing the aggregation; give -z 3 (one "
                             "barrier and sync per sample of -m ops) or drop one of -z and -m");
        if (*blocking != 0 && !batched) {
            t.meaning.timing = "per-iter";
            t.note("blocking", "--timing per-iter (a barrier, the op, a device sync, each timed: parbench's default)");
        }
    }
}

// -N, -a and -G: repeated sweeps, the aggregation over ranks, CUDA graphs.
void translate_repeat_aggregate_graph(Translation& t) {
    if (const auto cycles = t.value_of("run_cycles"); cycles && *cycles != 1) {
        t.meaning.repeat = static_cast<int>(*cycles);
        t.note("run_cycles", *cycles == 0 ? "--repeat 0 (the sweep again and again until stopped)"
                                        : "--repeat " + t.given.at("run_cycles") + " (the whole sweep that many times)");
    }
    if (const auto average = t.value_of("average")) {
        constexpr std::array<const char*, 4> aggregations{"rank0", "rank-mean", "rank-min", "rank-max"};
        if (*average > 3)
            throw UsageError("-a (--average) " + t.given.at("average") +
                             ": give 0 (rank 0), 1 (mean over ranks), 2 (min) or 3 (max), as nccl-tests takes it");
        t.meaning.aggregate = aggregations[static_cast<std::size_t>(*average)];
        t.note("average", "--aggregate " + *t.meaning.aggregate);
    }
    if (const auto graphs = t.value_of("cudagraph"); graphs && *graphs > 0) {
        t.meaning.graph = true;
        t.note("cudagraph", "--graph (each sample's ops replayed from one CUDA graph; nccl-tests replays all -n "
                          "iterations N times)");
    }
}

// -J, -M, -u and -I: the report file, the memory line, misaligned buffers, full statistics.
void translate_outputs(Translation& t) {
    if (t.given.count("output_file") > 0) {
        if (t.given.at("output_file").empty())
            throw UsageError("-J (--output_file) needs a file name (e.g. -J report.json)");
        t.meaning.json_path = t.given.at("output_file");
        t.note("output_file", "--json " + t.given.at("output_file") + " (parbench's report schema, not nccl-tests' JSON)");
    }
    if (const auto memory = t.value_of("memory")) {
        if (*memory > 1) throw UsageError("-M (--memory) " + t.given.at("memory") + ": give 0 or 1");
        t.meaning.memory_report = *memory == 1;
        if (t.meaning.memory_report) t.note("memory", "a line of rank 0's buffer memory at the largest size");
    }
    if (const auto unalign = t.value_of("unalign"); unalign && *unalign > 0) {
        t.meaning.unalign_elements = static_cast<std::size_t>(*unalign);
        t.note("unalign", "--buffer-offsets of " + t.given.at("unalign") + " elements for both buffers");
    }
    if (const auto per_iteration = t.value_of("per_iter_timing")) {
        if (*per_iteration > 1) throw UsageError("-I (--per_iter_timing) " + t.given.at("per_iter_timing") + ": give 0 or 1");
        t.meaning.full_statistics = *per_iteration == 1;
        if (t.meaning.full_statistics)
            t.note("per_iter_timing", "--full (t_min, t_max and p95 columns, each with its rank)");
    }
}

}  // namespace

void add_nccl_tests_flags(CLI::App& command, NcclTestsFlags& flags) {
    for (const FlagSpec& spec : specs) {
        const std::string key = spec.key;
        command
            .add_option_function<std::string>(
                spec.names, [&flags, key](const std::string& value) { flags.given[key] = value; }, spec.help)
            ->group("nccl-tests flags (docs/collectives.md: what each means here)");
    }
}

NcclTestsMeaning nccl_tests_meaning(const NcclTestsFlags& flags) {
    refuse_untaken_values(flags.given);
    Translation t{flags.given, {}};
    translate_timing(t);
    translate_repeat_aggregate_graph(t);
    translate_outputs(t);
    return t.meaning;
}

int check_runs_of(const std::string& value) {
    if (value.empty()) return 1;
    const bool digits = value.size() <= 6 &&
                        std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!digits)
        throw UsageError("-c/--check '" + value +
                         "': give nothing (check one run per size), or nccl-tests' count of checked runs per size "
                         "(-c 0 checks none, -c 1 one, -c 5 five)");
    return std::stoi(value);
}

std::string parbench_dtype_name(std::string_view name) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 3> nccl_names{{
        {"half", "float16"},
        {"float", "float32"},
        {"double", "float64"},
    }};
    for (const auto& [nccl, ours] : nccl_names)
        if (name == nccl) return std::string(ours);
    if (name == "f8e4m3" || name == "f8e5m2")
        throw UsageError("-d/--dtype " + std::string(name) +
                         ": parbench has no 8-bit floating type (MPI has none to reduce it with); use float16 or "
                         "bfloat16 for the nearest, or int8/uint8 for the bytes moved");
    return std::string(name);
}

}  // namespace parbench
