// After MPI has started, a usage error seen by one rank (an unwritable report path is
// checked on the first rank only) must stop every rank, or the others would wait forever
// in their next collective. Collective over `control`.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>

#include "comm/communicator.hpp"

namespace parbench {

// Throws UsageError with the lowest failing rank's message on every rank, if any failed.
void throw_if_any_rank_failed(Communicator& control, const std::optional<std::string>& local_error);

struct OutputFile {
    const std::string& path;  // empty: not asked for
    const char* flag;
};

// The first rank checks that every asked-for report file can be written (the others may
// not share its file system view); every rank throws the same UsageError if one cannot.
void check_outputs_writable(Communicator& control, std::initializer_list<OutputFile> outputs);

}  // namespace parbench
