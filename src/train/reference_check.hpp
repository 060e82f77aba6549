// --check: a parallel run against its serial reference (train_run.hpp's serial_reference_plan),
// run alike on every device and CPU kind. Two things may legitimately differ between them, and
// each is bounded by what the computation itself allows rather than by one number for all:
//
// - the arithmetic: sums in another order (per-rank partial sums, then the all-reduce; another
//   GEMM blocking), which every fp32 and bf16 element may show in its last bits, and which Adam
//   turns into steps of up to its bound for parameters whose exact gradient is zero
//   (zero_gradient_elements below);
// - an MoE router's decisions: a last-bit difference in a router score flips a near-tie
//   between the k-th and (k+1)-th expert, and the token then runs through another expert. The
//   reference follows the parallel run's routing (train/moe/routing_trace.hpp), so that only
//   the arithmetic is compared; where its own choice would have differed it reports the token
//   and the margin, a failure only when the margin is no near-tie.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "theory/model_config.hpp"
#include "theory/parameter_layout.hpp"
#include "theory/precision.hpp"
#include "theory/scheme_settings.hpp"

namespace parbench {

// Tolerances of the arithmetic, relative. fp32 sums in a different order (per-rank partial sums,
// then the all-reduce) differ in the last bits, ~1e-7 relative per reduction, and a dozen steps
// carry that to ~1e-8..1e-6 on the loss. Parameters are compared per tensor, as
// ||parallel - serial||_2 / ||serial||_2 over the elements whose gradient is not zero by
// construction (those are bounded apart, below). A broken scheme (a rank's gradient left out, a
// stale or misplaced shard) is off by 1e-3 or more after one step.
inline constexpr double check_tolerance_loss = 1e-5;
inline constexpr double check_tolerance_params = 2e-3;
// Each step's rounding is carried into the next steps' parameters, so the loss's difference grows
// with the steps (by at most ~1e-6 a step in the runs measured: llama-moe-small at --ep 4 with
// drops reached 1.1e-5 at its 11th step, following the run's routing): the loss at step i
// (from 0) is allowed max(check_tolerance_loss, (i + 1) check_tolerance_loss_per_step).
inline constexpr double check_tolerance_loss_per_step = 2e-6;
// bf16 (the serial reference runs in bf16 too): a last-bit difference in an fp32 sum moves
// an operand across a bf16 rounding boundary now and then, and that operand then differs by
// 2^-9 instead of 2^-24: the parallel run's summation order shows ~1000x larger. Measured
// on gpt-tiny over 3-8 steps (DP 2, ZeRO-1 at 4, TP 2 with and without SP, PP 2 zb-h1):
// loss up to 1.2e-5, parameters up to 2.4e-2. The tolerances leave 2-4x room. They still catch
// a lost or misplaced shard (off by O(1) in that tensor), but not a subtle one, nor a matmul
// left in fp32 (bf16 against fp32 differ by only ~2e-5 and ~8e-2): the fp32 --check is the one
// that proves a scheme right.
inline constexpr double check_tolerance_loss_bf16 = 5e-5;
inline constexpr double check_tolerance_params_bf16 = 5e-2;
inline constexpr double check_tolerance_loss_per_step_bf16 = 1e-5;

// Parameters whose exact gradient is zero whatever the data: the attention's key bias (GPT's
// qkvb rows C..2C: q·(k + b) adds q·b to every score of a query's row, which the softmax
// ignores), and, when a sequence is one token, the query and key projections whole (a softmax
// over one key is 1 whatever the score). Their computed gradient is rounding noise: exactly 0
// where the attention's backward cancels it exactly (naive attention at one token:
// P ∘ (dP - rowsum(P ∘ dP)) with P = 1), O(u) where it does not (flash attention's
// dS = P ∘ (dP - δ) with δ = rowsum(dO ∘ O), O rounded apart from P V; the key bias at any
// length). Adam divides by the gradient's own scale, so noise moves them by up to a full step
// of either sign, and two runs' noise differs: such an element may differ by 2 steps per step.
// `first`, `count`: elements of the full (canonical) tensor.
struct ZeroGradientElements {
    std::string tensor;
    std::size_t first = 0, count = 0;
    std::string why;
};
std::vector<ZeroGradientElements> zero_gradient_elements(const ModelConfig& model, int seq_len);

// The largest step Adam takes on one element (Kingma & Ba, arXiv 1412.6980 sec. 2.1):
// |Δ| <= lr (1 - β1) / sqrt(1 - β2) where 1 - β1 > sqrt(1 - β2), else lr. AdamW's decoupled weight
// decay shrinks a difference between two runs (by lr · wd per step), never grows it.
double adam_step_bound(const AdamWSettings& adamw);

// What --check allows: the arithmetic's tolerances for the precision, and for the elements of
// zero gradient an absolute difference of 2 adam_step_bound per step, element by element.
struct CheckTolerances {
    double loss = check_tolerance_loss;
    double loss_per_step = check_tolerance_loss_per_step;
    double params = check_tolerance_params;
    std::vector<ZeroGradientElements> zero_gradient;
    double zero_gradient_elementwise = 0.0;
};
CheckTolerances check_tolerances(const ModelConfig& model, int seq_len, Precision precision,
                                 const AdamWSettings& adamw, int steps);

// One routing decision the reference would have taken otherwise: global sample and position of
// the token, its MoE layer, and the margin of the reference's own scores between the parallel
// run's choice and its own (their difference, summed over the experts that differ).
struct RoutingFlip {
    int layer = 0;
    std::uint64_t sample = 0;
    int position = 0;
    double margin = 0.0;
};

// The routing half of an MoE check (train/moe/routing_trace.hpp fills it).
struct RoutingComparison {
    bool followed = false;            // false: the reference routed on its own (not_followed says why)
    std::string not_followed;
    std::uint64_t decisions = 0;      // tokens x MoE layers x steps the reference routed
    std::vector<RoutingFlip> flips;   // where its own choice differed
    double near_tie = 0.0;            // the largest margin a flip may have and pass
    bool passed() const;
};

struct CheckResult {
    double max_rel_diff_loss = 0.0;
    std::vector<double> rel_diff_loss;  // per step, warm-up first
    double max_rel_diff_params = 0.0;
    double tolerance_loss = 0.0;     // at the last step (the largest)
    double loss_over_tolerance = 0.0;  // max over steps of the difference / that step's tolerance
    double tolerance_params = 0.0;
    std::string worst_tensor;  // the parameter tensor with the largest difference
    // The elements of zero gradient (CheckTolerances), compared apart, element by element.
    std::size_t zero_gradient_elements = 0;
    double max_abs_diff_zero_gradient = 0.0;
    double tolerance_zero_gradient = 0.0;
    std::optional<RoutingComparison> routing;  // MoE models
    bool passed = false;
};

// Both runs must have run in the precision the tolerances are for.
CheckResult compare_with_reference(const std::vector<double>& loss, const std::vector<float>& parameters,
                                   const std::vector<double>& reference_loss,
                                   const std::vector<float>& reference_parameters, const ParameterLayout& layout,
                                   const CheckTolerances& tolerances);
// The tolerances of `precision` without zero-gradient elements (unit tests of the comparison).
CheckResult compare_with_reference(const std::vector<double>& loss, const std::vector<float>& parameters,
                                   const std::vector<double>& reference_loss,
                                   const std::vector<float>& reference_parameters, const ParameterLayout& layout,
                                   Precision precision = Precision::fp32);

}  // namespace parbench
