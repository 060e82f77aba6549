// What a report says about the tool that wrote it.
#pragma once

namespace parbench {

inline constexpr const char* tool_version = PARBENCH_VERSION;
// Short git hash of the build's source tree, "-dirty" when tracked files were modified,
// "unknown" outside a git checkout. Generated at build time.
const char* git_revision();

}  // namespace parbench
