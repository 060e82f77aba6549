#include "train/model.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "train/models/gpt.hpp"
#include "train/models/mlp.hpp"
#include "train/models/llama.hpp"

namespace parbench {

std::unique_ptr<Model> make_model(const ModelConfig& config, const MicrobatchShape& shape, std::uint64_t seed,
                                  Ops& ops, MemoryLedger& ledger, const TensorParallelGroup& tp,
                                  const PipelinePart& part, Precision precision, Recompute recompute,
                                  const ContextGroup& cp) {
    if (cp.active() && !config.has_sequence())
        throw std::logic_error("make_model: the MLP has no sequence to split over a context-parallel group");
    if (config.kind == ModelKind::gpt)
        return make_gpt_model(config, shape, seed, ops, ledger, tp, part, precision, recompute, cp);
    if (config.kind == ModelKind::llama)
        return make_llama_model(config, shape, seed, ops, ledger, tp, part, precision, recompute, cp);
    if (recompute != Recompute::none) throw std::logic_error("make_model: the MLP has nothing to recompute");
    if (part.active()) throw std::logic_error("make_model: pipeline stages are cut from GPT and Llama models only");
    return make_mlp_model(config, shape, seed, ops, ledger, tp, precision);
}

std::vector<int> pipeline_part_units(const ModelConfig& config, const PipelinePart& part) {
    if (!config.has_sequence()) throw std::logic_error("pipeline_part_units: GPT and Llama models only");
    std::vector<int> units;
    if (config.kind == ModelKind::llama) {
        // Llama's unit 0 (the embedding) sits on the first stage, its head (unit L + 1) on
        // the last; block l is unit l + 1.
        for (const LayerRange& chunk : part.chunks) {
            if (chunk.first == 0) units.push_back(0);
            for (int l = chunk.first; l < chunk.end; ++l) units.push_back(l + 1);
            if (chunk.end == config.layers) units.push_back(config.layers + 1);
        }
        std::sort(units.begin(), units.end());
        return units;
    }
    // GPT's unit 0 (embedding, final LayerNorm, tied output projection) sits on the first
    // stage and the last; block l is unit l + 1.
    bool embedding = false;
    for (const LayerRange& chunk : part.chunks)
        embedding = embedding || chunk.first == 0 || chunk.end == config.layers;
    if (embedding) units.push_back(0);
    for (const LayerRange& chunk : part.chunks)
        for (int l = chunk.first; l < chunk.end; ++l) units.push_back(l + 1);
    std::sort(units.begin(), units.end());
    return units;
}

namespace {
[[noreturn]] void no_pipeline(const char* what) {
    throw std::logic_error(std::string("Model::") + what + ": this model was built without pipeline chunks");
}
}  // namespace

std::size_t Model::boundary_numel() const { no_pipeline("boundary_numel"); }
float* Model::boundary_input(int, int) { no_pipeline("boundary_input"); }
const float* Model::boundary_output(int, int) { no_pipeline("boundary_output"); }
float* Model::boundary_gradient(int, int) { no_pipeline("boundary_gradient"); }
void Model::forward_chunk(int, int, ParameterAccess&) { no_pipeline("forward_chunk"); }
void Model::backward_chunk(int, int, float, BackwardPass, ParameterAccess&) { no_pipeline("backward_chunk"); }
int Model::shared_unit() const { return -1; }
bool Model::computes_loss() const { return true; }
ContextAttention* Model::context_attention() { return nullptr; }
std::size_t Model::context_workspace_bytes() const { return 0; }

ParameterLayout model_parameter_layout(const ModelConfig& config, int seq_len, const TensorSplit& split) {
    if (config.kind == ModelKind::gpt) return gpt_parameter_layout(config, seq_len, split);
    if (config.kind == ModelKind::llama) return llama_parameter_layout(config, split);
    return mlp_parameter_layout(config, split);
}

}  // namespace parbench
