#include "cli/divergence_reason.hpp"

#include <cmath>
#include <sstream>

#include "core/exact_number.hpp"

namespace parbench {
namespace {

// The config's values the first step computes with in float, each within the range
// parse_model_config let through (theory/model_config.hpp), or that it has none.
std::string first_step_values(const ModelConfig& model) {
    if (model.kind != ModelKind::llama)
        return "the " + model_kind_name(model.kind) + " config '" + model.name +
               "' sets only sizes, and its initial weights are GPT-2's N(0, 0.02) or the MLP's N(0, 1/hidden)";
    return "the llama config '" + model.name + "' sets rope_theta " + exact_number_text(model.rope_theta) +
           " and norm_eps " + exact_number_text(model.norm_eps) +
           ", both within what the float kernels take (rope_theta at least 1, norm_eps at least 1.2e-38)";
}

}  // namespace

std::string divergence_reason(const StepProgress& at, const ModelConfig& model, double lr, bool checked) {
    std::ostringstream reason;
    reason << "training diverged: the loss is " << (std::isnan(at.loss) ? "NaN" : at.loss > 0 ? "+inf" : "-inf")
           << " at step " << at.step + 1 << " of " << at.total_steps << " (" << (at.timed ? "timed" : "warm-up") << ")";
    if (at.step == 0)
        reason << ", before any update, so --lr is not the cause; " << first_step_values(model)
               << ": a kernel or this layout computed it from valid inputs; run the same model at --dp 1 --tp 1 "
                  "--pp 1, and report it with the config";
    else
        reason << "; lower --lr (now " << lr << "), the usual cause";
    if (checked) reason << "; --check did not compare with the serial run, since a diverged run differs from any";
    return reason.str();
}

}  // namespace parbench
