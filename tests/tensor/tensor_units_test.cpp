// Units of tensor and sequence parallelism that need no MPI: which pieces a rank holds, that
// the shards of a model merge back into the unsharded model (same initial values, every
// element once), the analytic traffic and activation formulas on literal cases, the
// activation memory a serial model measures, and the option checks.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "device/cpu_device.hpp"
#include "tests/support/usage_error_text.hpp"
#include "theory/model_config.hpp"
#include "theory/parameter_layout.hpp"
#include "theory/tensor_parallel_cost.hpp"
#include "train/memory_ledger.hpp"
#include "train/model.hpp"
#include "train/ops/ops.hpp"
#include "train/tensor_parallel.hpp"
#include "train/train_options.hpp"

namespace parbench {
namespace {

ModelConfig gpt_config(int layers, int hidden, int heads, int seq_len, int vocab) {
    return parse_model_config({{"kind", "gpt"}, {"layers", layers}, {"hidden", hidden}, {"heads", heads},
                               {"seq_len", seq_len}, {"vocab", vocab}},
                              "t", "t.json");
}

ModelConfig mlp_config(int layers, int hidden) {
    return parse_model_config({{"kind", "mlp"}, {"layers", layers}, {"hidden", hidden}}, "m", "m.json");
}

// A layout's initial values in canonical (tensor) order.
std::vector<float> initial_canonical(const ParameterLayout& layout, std::uint64_t seed) {
    const FlatLayout flat(layout, one_unit_per_group(layout), 1);
    std::vector<float> values(flat.padded_numel());
    flat.initial_values(seed, 0, values.size(), values);
    return flat.canonical(values);
}

// Shards each rank initialises on its own, merged, against the unsharded model's values.
void expect_shards_merge_into_the_model(const ModelConfig& config, int seq_len, int ways, TensorParallelStyle style) {
    const std::uint64_t seed = 77;
    const ParameterLayout full = model_parameter_layout(config, seq_len);
    std::vector<ParameterLayout> layouts;
    std::vector<std::vector<float>> shards;
    std::size_t held = 0;
    for (int q = 0; q < ways; ++q) {
        layouts.push_back(model_parameter_layout(config, seq_len, TensorSplit{q, ways, false, style}));
        shards.push_back(initial_canonical(layouts.back(), seed));
        held += layouts.back().total_numel();
    }
    EXPECT_LT(held, full.total_numel() * static_cast<std::size_t>(ways)) << "nothing was split";
    const std::vector<float> merged = merge_tensor_parallel_shards(full, layouts, shards);
    const std::vector<float> whole = initial_canonical(full, seed);
    ASSERT_EQ(merged.size(), whole.size());
    for (std::size_t i = 0; i < whole.size(); ++i) ASSERT_EQ(merged[i], whole[i]) << "element " << i;
}

TEST(TensorSplit, PiecesOfLinearsHeadsAndSlices) {
    const TensorSplit rank1_of_4{1, 4, false, TensorParallelStyle::megatron};
    const auto rows = column_parallel_rows(8, 6, rank1_of_4);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].row, 2);
    EXPECT_EQ(rows[0].rows, 2);
    EXPECT_EQ(rows[0].cols, 6);
    const auto cols = row_parallel_columns(6, 8, rank1_of_4);
    ASSERT_EQ(cols.size(), 1u);
    EXPECT_EQ(cols[0].col, 2);
    EXPECT_EQ(cols[0].cols, 2);
    EXPECT_EQ(cols[0].rows, 6);
    const auto qkv = head_parallel_qkv(8, 5, rank1_of_4);  // C = 8: q, k, v rows 2..3 of each
    ASSERT_EQ(qkv.size(), 3u);
    EXPECT_EQ(qkv[0].row, 2);
    EXPECT_EQ(qkv[1].row, 10);
    EXPECT_EQ(qkv[2].row, 18);
    const auto blocks = column_parallel_rows_by_input_slice(8, 8, rank1_of_4);
    ASSERT_EQ(blocks.size(), 4u);
    EXPECT_EQ(blocks[3].row, 2);
    EXPECT_EQ(blocks[3].col, 6);
    EXPECT_TRUE(column_parallel_rows(8, 6, TensorSplit{}).empty()) << "one rank holds the whole tensor";
}

TEST(TensorSplit, FullIndexWalksThePieces) {
    ParameterLayout layout;
    layout.add_unit("u");
    // Rows 2..3 of q, k and v of a (12, 3) QKV weight with C = 4, rank 1 of 2.
    const int id = layout.add_tensor("qkv", {12, 3}, head_parallel_qkv(4, 3, TensorSplit{1, 2}), InitKind::zeros);
    const TensorSpec& tensor = layout.tensor(id);
    EXPECT_EQ(tensor.shape, (std::vector<int>{6, 3}));
    EXPECT_EQ(tensor.full_index(0), 2u * 3u);       // q row 2
    EXPECT_EQ(tensor.full_index(5), 3u * 3u + 2u);  // q row 3, column 2
    EXPECT_EQ(tensor.full_index(6), 6u * 3u);       // k row 2 = full row 4 + 2
    EXPECT_EQ(tensor.full_index(17), 11u * 3u + 2u);
    EXPECT_THROW(tensor.full_index(18), std::out_of_range);
}

TEST(TensorSplit, GptShardsMergeIntoTheUnshardedModel) {
    const ModelConfig config = gpt_config(2, 24, 6, 6, 30);
    for (int ways : {2, 3, 6}) expect_shards_merge_into_the_model(config, 6, ways, TensorParallelStyle::megatron);
}

TEST(TensorSplit, MlpShardsMergeIntoTheUnshardedModelInBothStyles) {
    for (int layers : {3, 4}) {
        const ModelConfig config = mlp_config(layers, 12);
        for (int ways : {2, 3, 4}) {
            expect_shards_merge_into_the_model(config, 1, ways, TensorParallelStyle::megatron);
            expect_shards_merge_into_the_model(config, 1, ways, TensorParallelStyle::allgather);
        }
    }
}

TEST(TensorSplit, MergeRefusesReplicasThatDiffer) {
    const ModelConfig config = gpt_config(1, 8, 2, 4, 8);
    const ParameterLayout full = model_parameter_layout(config, 4);
    std::vector<ParameterLayout> layouts;
    std::vector<std::vector<float>> shards;
    for (int q = 0; q < 2; ++q) {
        layouts.push_back(model_parameter_layout(config, 4, TensorSplit{q, 2}));
        shards.push_back(initial_canonical(layouts.back(), 5));
    }
    // lnfw is the third tensor, held whole by both ranks: change rank 1's copy.
    const std::size_t lnfw = layouts[1].tensor(0).numel + layouts[1].tensor(1).numel;
    shards[1][lnfw] += 1.0f;
    try {
        merge_tensor_parallel_shards(full, layouts, shards);
        FAIL() << "replicas that differ were merged";
    } catch (const std::runtime_error& error) {
        EXPECT_NE(std::string(error.what()).find("lnfw"), std::string::npos) << error.what();
    }
}

TEST(TensorParallelCost, GptTrafficOnLiteralCases) {
    // L = 2, b = 4, s = 8, h = 16: n = 512 elements, r = 32 rows; 3 micro-batches.
    const ModelConfig config = gpt_config(2, 16, 4, 8, 64);
    const auto tp = tensor_parallel_traffic_per_step(config, 8, 4, 3, TensorSplit{0, 2});
    ASSERT_EQ(tp.size(), 1u);
    EXPECT_EQ(tp.at("allreduce").calls, 3.0 * (4 * 2 + 2 + 3));
    EXPECT_EQ(tp.at("allreduce").bytes, 3.0 * 4.0 * ((4 * 2 + 2) * 512 + 3 * 32));
    const auto sp = tensor_parallel_traffic_per_step(config, 8, 4, 1, TensorSplit{0, 2, true});
    EXPECT_EQ(sp.at("allgather").calls, 6 * 2 + 3);
    EXPECT_EQ(sp.at("allgather").bytes, 4.0 * (6 * 2 + 3) * 512);
    EXPECT_EQ(sp.at("reducescatter").calls, 4 * 2 + 2);
    EXPECT_EQ(sp.at("allreduce").calls, 3 + 2 + 1);
    EXPECT_EQ(sp.at("allreduce").bytes, 4.0 * (3 * 32 + 2 * 4 * 16 + 2 * 16));
    EXPECT_TRUE(tensor_parallel_traffic_per_step(config, 8, 4, 1, TensorSplit{}).empty());
}

TEST(TensorParallelCost, MlpTrafficOnLiteralCases) {
    // b = 5, h = 8: n = 40. Megatron, 3 layers: forward all-reduce after layer 1, backward
    // after layer 2 (layer 0's input gradient is not needed), the loss over layer 2's slices.
    const auto megatron = tensor_parallel_traffic_per_step(mlp_config(3, 8), 1, 5, 1, TensorSplit{0, 2});
    EXPECT_EQ(megatron.at("allreduce").calls, 3.0);
    EXPECT_EQ(megatron.at("allreduce").bytes, 4.0 * (40 + 40 + 5));
    const auto even = tensor_parallel_traffic_per_step(mlp_config(4, 8), 1, 5, 1, TensorSplit{0, 2});
    EXPECT_EQ(even.at("allreduce").calls, 2.0 + 1.0);  // rows 1, 3 forward; column 2 backward
    const auto allgather = tensor_parallel_traffic_per_step(
        mlp_config(4, 8), 1, 5, 1, TensorSplit{0, 2, false, TensorParallelStyle::allgather});
    EXPECT_EQ(allgather.at("allgather").calls, 3.0);
    EXPECT_EQ(allgather.at("reducescatter").calls, 3.0);
    EXPECT_EQ(allgather.at("allreduce").bytes, 4.0 * 5);
}

TEST(TensorParallelCost, ActivationFormulaMatchesThePaperShapeAndDividesByT) {
    // s = 8, b = 2, h = 16, a = 4.
    const ModelConfig config = gpt_config(1, 16, 4, 8, 32);
    const double sbh = 8.0 * 2 * 16;
    const double as_h = 4.0 * 8 / 16;
    const ActivationFormula none = gpt_activation_bytes_per_layer(config, 8, 2, TensorSplit{});
    EXPECT_DOUBLE_EQ(none.paper_bytes, sbh * (34 + 5 * as_h));
    EXPECT_DOUBLE_EQ(none.bytes, sbh * (64 + 4 * as_h) + 16.0 * 8 * 2);
    const ActivationFormula tp = gpt_activation_bytes_per_layer(config, 8, 2, TensorSplit{0, 4});
    EXPECT_DOUBLE_EQ(tp.paper_bytes, sbh * (10 + 24.0 / 4 + 5 * as_h / 4));
    EXPECT_DOUBLE_EQ(tp.bytes, sbh * (16 + 48.0 / 4 + 4 * as_h / 4) + 16.0 * 8 * 2);
    const ActivationFormula sp = gpt_activation_bytes_per_layer(config, 8, 2, TensorSplit{0, 4, true});
    EXPECT_DOUBLE_EQ(sp.paper_bytes, none.paper_bytes / 4);
    EXPECT_DOUBLE_EQ(sp.bytes, none.bytes / 4);
}

TEST(TensorParallelCost, SerialGptStoresWhatTheFormulaSays) {
    const ModelConfig config = gpt_config(2, 16, 4, 8, 32);
    CpuDevice device;
    std::unique_ptr<Ops> ops = make_ops(device);
    MemoryLedger ledger(device);
    MicrobatchShape shape;
    shape.batch = 3;
    shape.seq_len = 8;
    const std::unique_ptr<Model> model = make_model(config, shape, 1, *ops, ledger);
    EXPECT_EQ(static_cast<double>(model->activation_bytes_per_layer()),
              gpt_activation_bytes_per_layer(config, 8, 3, TensorSplit{}).bytes);
}

using parbench::testing::usage_error_text;

TEST(TensorOptions, BadSplitsNameTheFlagAndTheFix) {
    TrainOptions o;
    o.model = "gpt-tiny";  // 4 heads, hidden 64, seq 32, vocab 256
    o.layout.tp = 3;
    std::string message = usage_error_text([&] { resolve_train_options(o); });
    EXPECT_NE(message.find("--tp 3"), std::string::npos) << message;
    EXPECT_NE(message.find("head count 4"), std::string::npos) << message;
    o.layout.tp = 2;
    o.layout.sp = true;
    o.seq = 31;
    message = usage_error_text([&] { resolve_train_options(o); });
    EXPECT_NE(message.find("--sp"), std::string::npos) << message;
    EXPECT_NE(message.find("--seq"), std::string::npos) << message;
    o.seq.reset();
    EXPECT_EQ(usage_error_text([&] { resolve_train_options(o); }), "") << "tp 2 with sp fits gpt-tiny";
    o.layout.tp = 1;
    EXPECT_NE(usage_error_text([&] { resolve_train_options(o); }).find("--tp 2 or more"), std::string::npos);
    o.layout.sp = false;
    o.layout.tp = 2;
    o.layout.tp_style = "allgather";
    EXPECT_NE(usage_error_text([&] { resolve_train_options(o); }).find("MLP"), std::string::npos);
    o.model = "mlp-tiny";
    EXPECT_EQ(usage_error_text([&] { resolve_train_options(o); }), "");
    o.layout.tp_style = "ring";
    EXPECT_NE(usage_error_text([&] { resolve_train_options(o); }).find("--tp-style 'ring'"), std::string::npos);
}

}  // namespace
}  // namespace parbench
