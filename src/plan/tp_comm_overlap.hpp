// Tensor-parallel communication overlapped with the GEMMs beside it, as the frameworks run it:
// Megatron-core's --tp-comm-overlap (Transformer Engine's userbuffers, transformer_engine/pytorch/
// module/base.py initialize_ub, ring-exchange and pipelined "split" overlaps) and torchtitan's
// async TP (PyTorch's micro-pipelined all-gather-matmul and matmul-reduce-scatter,
// torch/distributed/_symmetric_memory). Both need sequence parallelism: the all-gather of the
// sequence-sharded activations before each column-parallel GEMM, and the reduce-scatter after
// each row-parallel GEMM (and their mirrors in backward) are what overlap.
//
// Each collective is cut into tp chunks pipelined with the GEMM that consumes (all-gather) or
// produces (reduce-scatter) it: while the GEMM runs on chunk i, chunk i + 1 moves. A pair of a
// GEMM of g and a collective of c then takes max(g, c) + min(g, c) / tp: the longer of the two,
// plus one chunk of the shorter that has nothing to hide behind (the first chunk's transfer
// before the GEMM starts, or the last chunk's after it ends). Exposed: max(0, c - g) +
// min(g, c) / tp.
#pragma once

namespace parbench {

double tp_overlap_exposed_ms(double gemm_ms, double comm_ms, int tp);

// A step's exposed tensor-parallel time when its `calls` collectives (totalling `comm_ms`) are
// each paired with one of the linear layers' GEMMs (totalling `gemm_ms`), taken as equal pairs.
double tp_overlap_step_exposed_ms(double gemm_ms, double comm_ms, double calls, int tp);

}  // namespace parbench
