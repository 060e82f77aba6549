// nccl-tests' command line on every collective command, so that a job script written for
// all_reduce_perf runs unchanged: each of its flags means in parbench what it means there,
// or is refused in one line naming the nccl-tests flag and what to use instead.
//
// Flags whose meaning parbench has under its own name carry both names on the command's
// option (-b/--minbytes, -e/--maxbytes, -f/--stepfactor, -i/--stepbytes, -n/--iters,
// -w/--warmup_iters, -o/--op, -r/--root, -d/--datatype, -c/--check, -T/--timeout); the rest
// are declared here and turned into parbench's options by nccl_tests_meaning. The values are
// nccl-tests' own (its README's Arguments and common.cu's parser, read for meaning):
// docs/collectives.md has the table with what differs.
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parbench {

// The values given to nccl-tests' own flags, by its long name ("agg_iters", "average", ...).
struct NcclTestsFlags {
    std::map<std::string, std::string> given;
};

// Adds -t -g -m -N -a -z -G -J -M -R -u -I -K -p -C -S -y -x -D -V and their long forms to a
// collective command, in --help's "nccl-tests flags" group.
void add_nccl_tests_flags(CLI::App& command, NcclTestsFlags& flags);

// What the nccl-tests flags given mean in parbench's terms: each set field is the value of the
// parbench option named beside it.
struct NcclTestsMeaning {
    std::optional<int> batch_size;              // -m N > 1: --timing batched --batch-size N
    std::optional<std::string> timing;          // -z 1 or 3 (and -m): --timing
    std::optional<std::string> aggregate;       // -a: --aggregate
    std::optional<int> repeat;                  // -N: whole sweeps, 0 until stopped
    bool graph = false;                         // -G N > 0: --graph
    std::optional<std::string> json_path;       // -J: --json
    std::optional<std::size_t> unalign_elements;  // -u: --buffer-offsets, in elements
    bool full_statistics = false;               // -I 1: --full
    bool memory_report = false;                 // -M 1: a line of buffer memory per rank
    // For the console's header: "-m 4: --timing batched --batch-size 4", in the flags' order.
    std::vector<std::string> translations;
};
// Throws UsageError for a value with no parbench meaning, naming the flag and what to use.
NcclTestsMeaning nccl_tests_meaning(const NcclTestsFlags& flags);

// -c/--check as nccl-tests gives it, a count of checked runs per size ("0", "1", "5"), or as
// parbench's flag without a value (""): the count. Throws UsageError for anything else.
int check_runs_of(const std::string& value);

// The parbench name of a type given to -d/--datatype/--dtype in nccl-tests' names (half, float,
// double; its int8 ... bfloat16 are parbench's too), or the text as given for parbench to
// judge. Throws UsageError for nccl-tests' fp8 types, which parbench has no form of.
std::string parbench_dtype_name(std::string_view name);

}  // namespace parbench
