// Marks functions that both the CPU code and CUDA kernels call, so that one formula
// serves both and the CPU tests exercise the code the GPU runs.
#pragma once

#if defined(__CUDACC__)
#define PARBENCH_HD __host__ __device__ inline
#else
#define PARBENCH_HD inline
#endif
