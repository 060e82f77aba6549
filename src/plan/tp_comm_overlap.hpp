// Tensor-parallel communication overlapped with the GEMMs beside it, as the frameworks run it:
// Megatron-core's --tp-comm-overlap (Transformer Engine's userbuffers) and torchtitan's async TP
// (PyTorch's micro-pipelined all-gather-matmul and matmul-reduce-scatter,
// torch/distributed/_symmetric_memory). Both need sequence parallelism: the all-gather of the
// sequence-sharded activations before each column-parallel GEMM, and the reduce-scatter after
// each row-parallel GEMM (and their mirrors in backward) are what overlap.
//
// Transformer Engine's defaults (transformer_engine/pytorch/module/base.py, initialize_ub,
// get_default_config) price the two kinds differently:
// - all-gathers (qkv/fc1 forward, proj/fc2 data gradient): "ring_exchange", num_splits = tp,
//   use_ce (the copy engines move the chunks), num_sm 1: the GEMM runs as tp chunks, the first on
//   the rank's own shard while the next shard arrives, so with g the GEMM and c the all-gather
//   (tp - 1 ring steps of c / (tp - 1)): g / tp + (tp - 1) max(g / tp, c / (tp - 1)); nothing
//   waits before the first chunk.
// - reduce-scatters (proj/fc2 forward): "pipeline", num_splits 4, num_sm 16 with set_sm_margin:
//   the GEMM runs on the SMs the communication leaves (132 - 16 of H100's), each quarter's
//   reduce-scatter beside the next quarter's GEMM, the last quarter's exposed:
//   g' / 4 + 3 max(g' / 4, c / 4) + c / 4, g' = g x SMs / (SMs - 16).
// Every chunk beyond the first pays the GEMM curve's per-call overhead again (launch, fill, tail):
// the cost that makes a small GEMM's overlap a loss. PyTorch's async TP pipelines the same way
// (copy-engine all-gathers, tp chunks), and is priced with the same rules.
#pragma once

namespace parbench {

struct TpOverlapDevice {
    double sms = 0;               // the device's SMs; 0: unknown, no margin taken
    double chunk_overhead_ms = 0; // per extra GEMM chunk: the GEMM curve's per-call overhead
};

// Transformer Engine's default splits and communication SMs (see above).
inline constexpr int te_pipeline_splits = 4;
inline constexpr double te_pipeline_comm_sms = 16;

// Exposed time of one all-gather of c paired with its GEMM of g: what the pair takes beyond g.
double tp_overlap_allgather_exposed_ms(double gemm_ms, double comm_ms, int tp, const TpOverlapDevice& device);
// Exposed time of one reduce-scatter of c paired with the GEMM of g that produces it.
double tp_overlap_reducescatter_exposed_ms(double gemm_ms, double comm_ms, int tp, const TpOverlapDevice& device);

// A step's exposed tensor-parallel time when its all-gathers (`ag_calls` of them, totalling
// `ag_ms`) and reduce-scatters are each paired with one of the linear layers' GEMMs (totalling
// `gemm_ms`), taken as equal pairs.
double tp_overlap_step_exposed_ms(double gemm_ms, double ag_ms, double ag_calls, double rs_ms, double rs_calls, int tp,
                                  const TpOverlapDevice& device);

}  // namespace parbench
