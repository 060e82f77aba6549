// --background on a GPU rank (NCCL backend): the load runs on a CUDA stream of its own on the
// rank's GPU, beside the stream the timed collective runs on, fed by a host thread that polls its
// stop flag between launches (bench/load_loop.hpp) and keeps the stream at most two units ahead:
//   gemm:N            cuBLAS SGEMM of N x N fp32 matrices (CUBLAS_COMPUTE_32F: no TF32, the
//                     CPU load's sgemm); 2 N^3 flops a call
//   stream:BYTES      the STREAM triad kernel (kernels/stream_triad.cu), 3 arrays of BYTES / 3
//   collective:BYTES  ncclAllReduce of BYTES (float32) on a second NCCL communicator of the same
//                     ranks (ncclCommSplit), on the load's stream; a one-byte stop vote after each
// The tally's seconds are CUDA events on the load's stream, from before its first unit to after
// its last. Part of the CUDA plugin (device/cuda_plugin.hpp); no CUDA header here.
#pragma once

#include <memory>

#include "bench/background_load.hpp"

namespace parbench {

// `device` is the rank's CudaDevice and `data` its NcclCommunicator; a collective load splits its
// second communicator off `data`, so every rank of `data` calls this at the same point.
std::unique_ptr<BackgroundLoad> make_gpu_background_load(const BackgroundSpec& spec, Device& device,
                                                         Communicator& data);

}  // namespace parbench
