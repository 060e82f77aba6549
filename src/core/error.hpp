// Errors cross layers as exceptions and are turned into a message and an exit status
// in one place (cli/main.cpp), so that no code deep inside exits or returns codes.
#pragma once

#include <stdexcept>
#include <string>

namespace parbench {

// The user asked for something impossible or malformed: exit status 2. The message names
// the flag (or file) and the fix.
class UsageError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// A library call (MPI, CUDA, NCCL, cuBLAS, the file system) failed: exit status 1.
// The message names the call, where it was made and, when known, the rank.
class RuntimeFailure : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// A collective or a training step produced wrong data: exit status 1 after the report
// has been written, so the evidence is kept.
class ValidationFailure : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace parbench
