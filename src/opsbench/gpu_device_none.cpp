// Built instead of gpu_device_cuda.cpp in CPU-only builds: there is never a GPU to open.
#include "opsbench/gpu_device.hpp"

namespace parbench {

std::unique_ptr<Device> open_first_gpu(std::string& why_not) {
    why_not = "this build has no CUDA (configure with -DPARBENCH_CUDA=ON)";
    return nullptr;
}

}  // namespace parbench
