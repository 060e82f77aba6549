#include "theory/model_shape.hpp"

#include <cmath>
#include <cstdio>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "theory/model_layout.hpp"

namespace parbench {

double parse_parameter_count(const std::string& text) {
    const auto refuse = [&] {
        return UsageError("--params '" + text + "': give a parameter count from 10M to 1000T, such as 7.5B, 350M or 1.3e9");
    };
    const std::size_t digits = text.find_first_not_of("0123456789.eE+-");
    const std::string number = text.substr(0, digits);
    const std::string suffix = digits == std::string::npos ? "" : text.substr(digits);
    const double scale = suffix.empty() ? 1 : suffix == "K" ? 1e3 : suffix == "M" ? 1e6 : suffix == "B" || suffix == "G" ? 1e9
                                                                   : suffix == "T" ? 1e12 : -1;
    if (scale < 0 || number.empty()) throw refuse();
    double value = 0;
    try {
        value = parse_finite(number, "--params") * scale;
    } catch (const UsageError&) {
        throw refuse();
    }
    if (!(value >= min_parameter_request && value <= model_limits::max_parameters)) throw refuse();
    return value;
}

double model_parameter_count(const ModelConfig& config) {
    // Every block holds the same tensors, so two small layouts give the count exactly without a
    // per-layer table: the one-block model's count plus (layers - 1) blocks.
    ModelConfig one = config, two = config;
    one.layers = 1;
    two.layers = 2;
    const double base = static_cast<double>(model_parameter_layout(one, one.seq_len).total_numel());
    const double block = static_cast<double>(model_parameter_layout(two, two.seq_len).total_numel()) - base;
    return base + block * (config.layers - 1);
}

void check_model_size(const ModelConfig& config, const std::string& source) {
    const double parameters = model_parameter_count(config);
    if (parameters > model_limits::max_parameters) {
        char text[160];
        std::snprintf(text, sizeof text, ": the model has %.3g parameters (%d layers, hidden %d), above the %.0e parbench "
                      "plans and trains; give a smaller model", parameters, config.layers, config.hidden,
                      model_limits::max_parameters);
        throw UsageError(source + text);
    }
}

namespace {

// The GPT shape (hidden a multiple of 128, 128-wide heads) whose exact parameter count is
// nearest `target` among those within 1 % of it, preferring a hidden that divides into 8 x 128
// (heads that tp 8 splits), layers a multiple of 4 (pipelines of 2 and 4), then the GPT-3
// family's proportion hidden ~ 128 x layers (Brown et al. 2020, table 2.1). Megatron's 7.5B
// (36 x 4096) is what 7.5B gives.
struct ChosenShape {
    int layers = 0, hidden = 0;
    double parameters = 0;
};

ChosenShape shape_for_parameters(double target, ModelConfig config) {
    ChosenShape best;
    double best_score = 0;
    ChosenShape nearest;
    for (int hidden = 128; hidden <= model_limits::max_hidden; hidden += 128) {
        config.hidden = hidden;
        config.heads = hidden / 128;
        config.layers = 1;
        const double base = static_cast<double>(model_parameter_layout(config, config.seq_len).total_numel());
        if (base > target * 1.01) break;  // one block of this width is too many already, and wider is more
        config.layers = 2;
        const double block = static_cast<double>(model_parameter_layout(config, config.seq_len).total_numel()) - base;
        const double ideal = 1.0 + (target - base) / block;
        for (const double layers : {std::floor(ideal), std::ceil(ideal)}) {
            if (layers < 1 || layers > model_limits::max_layers) continue;
            const double parameters = base + block * (layers - 1);
            const double miss = std::abs(parameters - target) / target;
            if (nearest.layers == 0 || miss < std::abs(nearest.parameters - target) / target)
                nearest = {static_cast<int>(layers), hidden, parameters};
            if (miss > 0.01) continue;
            const double score = (hidden >= 1024 && hidden % 1024 != 0 ? 1.0 : 0.0) +
                                 (layers >= 4 && std::fmod(layers, 4.0) != 0 ? 0.5 : 0.0) +
                                 std::abs(std::log(hidden / (128.0 * layers)));
            if (best.layers == 0 || score < best_score) {
                best = {static_cast<int>(layers), hidden, parameters};
                best_score = score;
            }
        }
    }
    if (best.layers == 0) {
        char text[240];
        std::snprintf(text, sizeof text, "--params %.4g: no GPT shape lands within 1 %% of it with vocabulary %d and "
                      "sequence %d (nearest: %d layers x hidden %d, %.4g parameters); give --layers and --hidden",
                      target, config.vocab, config.seq_len, nearest.layers, nearest.hidden, nearest.parameters);
        throw UsageError(text);
    }
    return best;
}

}  // namespace

ResolvedModel resolve_plan_model(const ModelFlags& f) {
    const bool shape_flags = f.layers || f.hidden || f.heads || f.vocab;
    if (!f.model.empty() && (!f.params.empty() || shape_flags))
        throw UsageError("--model names a complete model; drop --params/--layers/--hidden/--heads/--vocab, or --model");
    ResolvedModel resolved;
    if (!f.model.empty()) {
        resolved.config = load_model_config(f.model);
        resolved.source = "--model " + f.model + " (" + resolved.config.source + ")";
        if (f.seq) resolved.config.seq_len = *f.seq;
        check_model_size(resolved.config, "--model " + f.model);
        return resolved;
    }
    if (f.params.empty() && !shape_flags)
        throw UsageError("no model: give --model NAME|PATH, or --params N (with --layers --hidden --heads --seq --vocab)");
    ModelConfig& c = resolved.config;
    c.kind = ModelKind::gpt;
    c.seq_len = f.seq.value_or(2048);
    c.vocab = f.vocab.value_or(51200);
    if (f.layers && f.hidden) {
        c.layers = *f.layers;
        c.hidden = *f.hidden;
        c.heads = f.heads.value_or(std::max(1, *f.hidden / 128));
        resolved.source = "shape flags";
    } else if (!f.params.empty() && !f.layers && !f.hidden) {
        if (f.heads) throw UsageError("--heads with --params: the shape's heads are 128 wide; give --layers and --hidden too, or drop --heads");
        const double n = parse_parameter_count(f.params);
        const ChosenShape shape = shape_for_parameters(n, c);
        c.layers = shape.layers;
        c.hidden = shape.hidden;
        c.heads = c.hidden / 128;
        char text[200];
        std::snprintf(text, sizeof text, ": %d layers x hidden %d = %.4g parameters (%.2f %% %s the request), near "
                      "the GPT-3 family's proportions (hidden ~ 128 x layers, 128-wide heads)", c.layers, c.hidden,
                      shape.parameters, 100.0 * std::abs(shape.parameters - n) / n, shape.parameters < n ? "below" : "above");
        resolved.source = "--params " + f.params + text;
    } else {
        throw UsageError("--layers and --hidden go together (with --params, give both or neither)");
    }
    if (c.layers < 1 || c.hidden < 1 || c.heads < 1 || c.vocab < 1 || c.seq_len < 1)
        throw UsageError("--layers, --hidden, --heads, --seq and --vocab must be positive");
    if (c.heads > c.hidden || c.hidden % c.heads != 0)
        throw UsageError("--heads " + std::to_string(c.heads) + " does not divide --hidden " + std::to_string(c.hidden));
    check_model_size(c, "--layers " + std::to_string(c.layers) + " --hidden " + std::to_string(c.hidden));
    c.name = f.params.empty() ? "custom" : "gpt-" + f.params;
    c.source = resolved.source;
    return resolved;
}

}  // namespace parbench
