#include "theory/model_shape.hpp"

#include <cmath>

#include "core/error.hpp"
#include "theory/model_layout.hpp"

namespace parbench {

double parse_parameter_count(const std::string& text) {
    std::size_t used = 0;
    double value = 0;
    try {
        value = std::stod(text, &used);
    } catch (const std::exception&) {
        throw UsageError("--params '" + text + "': give a parameter count such as 7.5B, 350M or 1.3e9");
    }
    const std::string suffix = text.substr(used);
    const double scale = suffix.empty() ? 1 : suffix == "K" ? 1e3 : suffix == "M" ? 1e6 : suffix == "B" || suffix == "G" ? 1e9
                                                                   : suffix == "T" ? 1e12 : -1;
    if (scale < 0 || !(value > 0))
        throw UsageError("--params '" + text + "': give a parameter count such as 7.5B, 350M or 1.3e9");
    return value * scale;
}

ResolvedModel resolve_plan_model(const ModelFlags& f) {
    const bool shape_flags = f.layers || f.hidden || f.heads || f.vocab;
    if (!f.model.empty() && (!f.params.empty() || shape_flags))
        throw UsageError("--model names a complete model; drop --params/--layers/--hidden/--heads/--vocab, or --model");
    ResolvedModel resolved;
    if (!f.model.empty()) {
        resolved.config = load_model_config(f.model);
        if (resolved.config.moe || resolved.config.mla)
            throw UsageError("--model " + f.model + ": a mixture-of-experts model (\"moe\"/\"mla\"); plan does not lay "
                             "out MoE models yet (no --ep): pick a dense model");
        resolved.source = "--model " + f.model + " (" + resolved.config.source + ")";
        if (f.seq) resolved.config.seq_len = *f.seq;
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
        // 12 l h^2 = N with h = 128 l  ->  l = (N / (12 * 128^2))^(1/3)
        const double n = parse_parameter_count(f.params);
        // Layers a multiple of 8 and hidden of 1024 (of 128 below 4096), so that common tp and pp divide them.
        const double layers = std::cbrt(n / (12.0 * 128.0 * 128.0));
        c.layers = layers < 8 ? std::max(1, static_cast<int>(std::lround(layers))) : static_cast<int>(std::lround(layers / 8)) * 8;
        const double hidden = std::sqrt(n / (12.0 * c.layers));
        const double step = hidden >= 4096 ? 1024.0 : 128.0;
        c.hidden = std::max(128, static_cast<int>(std::lround(hidden / step) * step));
        c.heads = f.heads.value_or(c.hidden / 128);
        resolved.source = "--params " + f.params + ": shape chosen with the GPT-3 family's proportions (hidden ~ 128 "
                          "x layers, 128-wide heads)";
    } else {
        throw UsageError("--layers and --hidden go together (with --params, give both or neither)");
    }
    if (c.layers < 1 || c.hidden < 1 || c.heads < 1 || c.vocab < 1 || c.seq_len < 1)
        throw UsageError("--layers, --hidden, --heads, --seq and --vocab must be positive");
    if (c.hidden % c.heads != 0)
        throw UsageError("--heads " + std::to_string(c.heads) + " does not divide --hidden " + std::to_string(c.hidden));
    c.name = f.params.empty() ? "custom" : "gpt-" + f.params;
    c.source = resolved.source;
    return resolved;
}

}  // namespace parbench
