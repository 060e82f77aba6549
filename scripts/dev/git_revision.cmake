# Writes OUTPUT, a C++ file returning the source tree's git revision (short hash, "-dirty"
# when tracked files differ from it), at every build rather than at configure time, so a
# report never names a stale revision. The file is rewritten only when the revision
# changes, which keeps builds incremental.
#   cmake -DSOURCE_DIR=... -DOUTPUT=... -P scripts/dev/git_revision.cmake
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT revision)
  set(revision unknown)
elseif(changes)
  string(APPEND revision -dirty)
endif()
set(content "// Generated at build time by scripts/dev/git_revision.cmake; do not edit.\n#include \"core/version.hpp\"\n\nconst char* parbench::git_revision() { return \"${revision}\"; }\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} previous)
endif()
if(NOT "${previous}" STREQUAL "${content}")
  file(WRITE ${OUTPUT} "${content}")
endif()
