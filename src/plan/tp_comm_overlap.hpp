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
// - "bulk" (the backward's qkv_dgrad, fc1_dgrad: the all-gather of the layer's input that its
//   weight gradient needs, beside the data-gradient GEMM; qkv_wgrad, fc1_wgrad: the reduce-scatter
//   of that data gradient, beside the weight-gradient GEMM): one collective on 16 SMs beside one
//   unsplit GEMM on the rest (comm_gemm_overlap.cpp, CommOverlapBase::bulk_overlap, _math_sms):
//   max(g x SMs / (SMs - 16), c) - g exposed, no chunks.
// - the two remaining weight gradients (proj_wgrad, fc2_wgrad, TE's "external") carry no
//   collective of their own; a tp collective paired with no GEMM above (the logits' all-gather:
//   Megatron-core's output layer is its own ColumnParallelLinear, not TE's; the embedding's
//   reduce-scatter) stays exposed.
// Every chunk beyond the first pays the GEMM curve's per-call overhead again (launch, fill, tail):
// the cost that makes a small GEMM's overlap a loss. Each pair is priced at its own GEMM's time
// (qkv, projection and MLP GEMMs differ up to 4x in size while every tp collective carries the
// same s x b x h activation), so a small GEMM's pair can be communication-bound while a large
// one hides all. PyTorch's async TP pipelines the same way (copy-engine all-gathers, tp chunks),
// and is priced with the same rules.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace parbench {

// Transformer Engine's overlap methods (module/base.py, initialize_ub's `methods`).
enum class TeOverlap { ring_exchange, pipeline, bulk_all_gather, bulk_reduce_scatter };

// The method TE runs beside a linear layer's GEMM, by the GEMM's name in theory/layer_work.cpp
// (qkv forward: ring_exchange, its data gradient: bulk all-gather, its weight gradient: bulk
// reduce-scatter, ...); none for the external weight gradients and every other GEMM.
std::optional<TeOverlap> te_overlap_of(const std::string& gemm_name);

// `count` GEMMs of `gemm_ms` each, every one paired with one tp collective by `method`.
struct TpOverlapGemm {
    TeOverlap method = TeOverlap::ring_exchange;
    double gemm_ms = 0;
    double count = 0;
};

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

// Exposed time of one bulk collective of c beside its GEMM of g (either kind: TE runs both alike).
double tp_overlap_bulk_exposed_ms(double gemm_ms, double comm_ms, const TpOverlapDevice& device);

struct TpOverlapStep {
    double exposed_ms = 0;
    // The communication the pipelined and bulk pairs hid: what runs on SMs beside the GEMM (the
    // ring exchanges move their chunks on copy engines), which slows the GEMM when it keeps
    // every SM (no SM margin: PlanLayout's tp_comm_sm_margin).
    double hidden_on_sms_ms = 0;
};

// A step's tensor-parallel time: each GEMM in `pairs` (the step's, counts included) with one
// all-gather (of `ag_calls` totalling `ag_ms`, all of one size) or reduce-scatter by its method;
// the collectives beyond the pairs' are exposed whole.
TpOverlapStep tp_overlap_step(const std::vector<TpOverlapGemm>& pairs, double ag_ms, double ag_calls, double rs_ms,
                              double rs_calls, int tp, const TpOverlapDevice& device);

}  // namespace parbench
