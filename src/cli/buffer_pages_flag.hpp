// --buffer-pages normal|huge, declared here once for every command that allocates buffers (the
// collectives, all, pairs, train): which pages the run's host buffers ask for
// (device/host_pages.hpp). The default, normal, is what a user's own program and the peers it is
// compared with get (docs/collectives.md, "Buffer pages").
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.hpp"
#include "comm/backend.hpp"

namespace parbench {

// Adds the flag to a command; a value other than normal or huge is refused as it is parsed.
void add_buffer_pages_flag(CLI::App& command);

// make_backend with the pages the invocation's --buffer-pages asks for (and `nccl_log` passed
// on). A GPU backend's buffers are device memory, which the flag does not apply to: given there,
// rank 0 says it is ignored.
Backend make_run_backend(const Invocation& invocation, BackendChoice choice, const MpiSession& session,
                         Communicator& control, NcclLogLevel nccl_log = NcclLogLevel::none);

}  // namespace parbench
