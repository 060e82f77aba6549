// After MPI has started, every rank must take the same path: a usage error seen by one rank
// (a file missing on one node, a flag given to one rank only, an unwritable report path
// checked on the first rank only) must stop every rank, or the others would wait forever in
// their next collective; and ranks launched with different options must be refused before
// they allocate or measure anything. Every function here is collective over `control`.
#pragma once

#include <nlohmann/json.hpp>

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

// Compares a digest of `options` (a command's resolved config, with input files' contents
// folded in by the caller) across ranks; on a difference throws, on every rank, UsageError
//   ranks disagree on --dtype: rank 0 float32, rank 1 float64; launch every rank with the same flags
// naming the first option that differs. Costs one 8-byte allgather when the ranks agree.
void require_same_options(Communicator& control, const nlohmann::json& options);

// An option value that is compared by `compared` only, and shown as "label (compared)": an
// input file's digest, shown with the name or path each rank found it by.
std::string labelled_value(const std::string& compared, const std::string& label);

namespace detail {
// "a.b" -> value text, depth first, object keys in order; arrays are one value.
std::vector<std::pair<std::string, std::string>> flatten_options(const nlohmann::json& options);
// The flag a config key comes from, for messages: "global_batch" -> "--global-batch".
std::string flag_of_config_key(const std::string& key);
// The message for the first key whose values differ; `by_rank` holds every rank's flattened
// options. nullopt when all agree.
std::optional<std::string> disagreement(const std::vector<std::vector<std::pair<std::string, std::string>>>& by_rank);
std::uint64_t fnv1a(const std::string& text);
}  // namespace detail

}  // namespace parbench
