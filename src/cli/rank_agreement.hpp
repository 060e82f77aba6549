// After MPI has started, every rank must take the same path: a usage error seen by one rank
// (a file missing on one node, a flag given to one rank only, an unwritable report path
// checked on the first rank only) must stop every rank, or the others would wait forever in
// their next collective; and ranks launched with different options must be refused before
// they allocate or measure anything. Every function here is collective over `control`.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace parbench {

// The lowest failing rank's message, the same on every rank; nullopt when no rank failed.
// When only some ranks failed, the message starts with "rank R (HOST): " (and says how many
// others failed), since the first rank would otherwise print an error it never saw.
// `hosts` is every rank's host name (MpiSession::hosts_by_rank); empty: not named.
std::optional<std::string> agree_on_error(Communicator& control, const std::vector<std::string>& hosts,
                                          const std::optional<std::string>& local_error);

// Throws UsageError with agree_on_error's message on every rank, if any rank failed.
void throw_if_any_rank_failed(Communicator& control, const std::optional<std::string>& local_error,
                              const std::vector<std::string>& hosts = {});

struct OutputFile {
    const std::string& path;  // empty: not asked for
    const char* flag;
};

// The first rank checks that every asked-for report file can be written (the others may
// not share its file system view); every rank throws the same UsageError if one cannot.
void check_outputs_writable(Communicator& control, std::initializer_list<OutputFile> outputs);

// The first agreement of every command that starts MPI: every rank must run the same build of
// parbench (version and git revision) and the same command, since ranks of different commands
// or builds make different MPI calls and would wait for each other forever. Throws, on every
// rank, UsageError naming each rank's build or command:
//   ranks run different parbench builds: rank 0 0.5.0 (64eca0a), rank 1 0.5.0 (9e5c572); install one build on every host
//   ranks run different commands: rank 0 allreduce, rank 1 info; launch every rank with the same command and flags
// Costs one 8-byte allgather when they agree. `command` is what_rank_runs(argv).
void require_same_job(Communicator& control, const std::string& command);

// What a rank runs, as require_same_job compares it: the command word and the flags that make
// the rank do something else than run it ("allreduce", "train --print-schedule", "plan",
// "allreduce --help", "--version"): two such ranks make different MPI calls, or none.
std::string what_rank_runs(const std::vector<std::string>& arguments);

// Compares a digest of `options` (a command's resolved config, with input files' contents
// folded in by the caller) across ranks; on a difference throws, on every rank, UsageError
//   ranks disagree on --dtype: rank 0 float32, rank 1 float64; launch every rank with the same flags
// naming the first option that differs. Costs one 8-byte allgather when the ranks agree.
// `is_flag` says whether the command has a flag of that name ("--size"): a key is named by a
// flag only when the command has it, never by a guess (see detail::flag_of_config_key).
using FlagLookup = std::function<bool(const std::string& flag)>;
void require_same_options(Communicator& control, const nlohmann::json& options, const FlagLookup& is_flag = {});

// An option value that is compared by `compared` only, and shown as "label (compared)": an
// input file's digest, shown with the name or path each rank found it by.
std::string labelled_value(const std::string& compared, const std::string& label);

namespace detail {
// "a.b" -> value text, depth first, object keys in order; arrays are one value; a floating-point
// value as exact_number_text writes it (core/exact_number.hpp), so that values agree only when
// their bit patterns do.
std::vector<std::pair<std::string, std::string>> flatten_options(const nlohmann::json& options);
// The flag a config key comes from, for messages: "global_batch" -> "--global-batch",
// "mpi_threads.requested" -> "--mpi-threads". With `is_flag`, a derived name the command lacks is
// not offered: the key is named as it is ("the option 'a.b'").
std::string flag_of_config_key(const std::string& key, const FlagLookup& is_flag = {});
// The message for the first key whose values differ; `by_rank` holds every rank's flattened
// options. nullopt when all agree.
std::optional<std::string> disagreement(const std::vector<std::vector<std::pair<std::string, std::string>>>& by_rank,
                                        const FlagLookup& is_flag = {});
std::uint64_t fnv1a(const std::string& text);
// "rank 0 a, ranks 1,2 b": the ranks grouped by value, in rank order.
std::string values_by_rank(const std::vector<std::string>& values);
// require_same_job's message for every rank's command and build ("0.5.0 (64eca0a)"); nullopt
// when all agree. The build is named first: another build may not even share the commands.
std::optional<std::string> job_disagreement(const std::vector<std::string>& commands,
                                            const std::vector<std::string>& builds);
}  // namespace detail

}  // namespace parbench
