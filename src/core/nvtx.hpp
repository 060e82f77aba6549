// Named ranges in the "parbench" NVTX domain, so that `nsys profile mpirun ... parbench ...`
// shows every phase. NVTX is header-only and costs a pointer check when no tool is
// attached; builds without the CUDA toolkit's NVTX headers get an empty range.
#pragma once

#include <string>

#if defined(PARBENCH_HAVE_NVTX)
#include <nvtx3/nvtx3.hpp>
#endif

namespace parbench {

// "<prefix><number><suffix>", a range name such as "F3" or "h2 forward". Built by appending, not
// as prefix + std::to_string(number): GCC 12 inlines that operator+ (an insert at the front) into
// a memcpy it then wrongly warns may overlap (-Wrestrict, a false positive).
inline std::string numbered_range_name(const char* prefix, int number, const char* suffix = "") {
    std::string name = prefix;
    name += std::to_string(number);
    name += suffix;
    return name;
}

#if defined(PARBENCH_HAVE_NVTX)
struct NvtxDomain {
    static constexpr const char* name{"parbench"};
};

class NvtxRange {
  public:
    explicit NvtxRange(const char* name) : range_(name) {}
    explicit NvtxRange(const std::string& name) : range_(name) {}

  private:
    nvtx3::scoped_range_in<NvtxDomain> range_;
};
#else
class NvtxRange {
  public:
    explicit NvtxRange(const char*) {}
    explicit NvtxRange(const std::string&) {}
};
#endif

}  // namespace parbench
