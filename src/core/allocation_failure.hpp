// A device or host allocation that failed for want of memory: typed, so that a caller that knows
// which flag sized the buffer (bench/collective_sweep.hpp, the commands) can say so without
// reading the message's text.
#pragma once

#include "core/error.hpp"

namespace parbench {

class AllocationFailure : public RuntimeFailure {
  public:
    using RuntimeFailure::RuntimeFailure;
};

}  // namespace parbench
