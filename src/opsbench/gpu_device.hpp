// The GPU parbench-ops measures on, when one is visible. No CUDA header here, so the
// benchmark's main compiles in CPU-only builds too.
#pragma once

#include <memory>
#include <string>

#include "device/device.hpp"

namespace parbench {

// GPU 0 as a Device, or nullptr with `why_not` saying why (no CUDA in this build, no driver,
// no device).
std::unique_ptr<Device> open_first_gpu(std::string& why_not);

}  // namespace parbench
