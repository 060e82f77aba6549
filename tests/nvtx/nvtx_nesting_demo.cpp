// Opens a known tree of parbench NVTX ranges, on the main thread and on a second one, so the
// recorder and the checker can be tested before (and apart from) any parbench command.
#include <thread>

#include "core/nvtx.hpp"

int main() {
    using parbench::NvtxRange;
    NvtxRange run("run demo");
    {
        NvtxRange point("demo 8B");
        {
            NvtxRange warmup("warmup");
            NvtxRange op("allreduce");
        }
        for (int i = 0; i < 3; ++i) {
            NvtxRange iteration("iteration");
            NvtxRange op("allreduce");
        }
    }
    // Ranges nest per thread: one opened on another thread is not inside "run demo".
    std::thread other([] { NvtxRange alone("other thread"); });
    other.join();
    return 0;
}
