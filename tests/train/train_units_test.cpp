// Units of the training engine that need no MPI: configs, initialisation, data, mesh
// arithmetic, the memory ledger, formulas, option checks and the --check comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/memory_check.hpp"
#include "core/error.hpp"
#include "device/cpu_device.hpp"
#include "tests/support/usage_error_text.hpp"
#include "theory/expert_parallel.hpp"
#include "theory/model_config.hpp"
#include "theory/parameter_layout.hpp"
#include "train/memory_ledger.hpp"
#include "train/mesh.hpp"
#include "train/metrics.hpp"
#include "train/model.hpp"
#include "train/models/transformer_parts.hpp"
#include "train/synthetic_data.hpp"
#include "train/train_options.hpp"
#include "train/train_run.hpp"

namespace parbench {
namespace {

nlohmann::json tiny_gpt_json() {
    return {{"kind", "gpt"}, {"layers", 2}, {"hidden", 16}, {"heads", 4}, {"seq_len", 8}, {"vocab", 32}};
}

using parbench::testing::usage_error_text;

TEST(ModelConfig, ParsesAGptConfig) {
    const ModelConfig config = parse_model_config(tiny_gpt_json(), "t", "t.json");
    EXPECT_EQ(config.kind, ModelKind::gpt);
    EXPECT_EQ(config.layers, 2);
    EXPECT_EQ(config.hidden, 16);
    EXPECT_EQ(config.heads, 4);
    EXPECT_EQ(config.seq_len, 8);
    EXPECT_EQ(config.vocab, 32);
}

TEST(ModelConfig, UnknownKeyIsNamed) {
    nlohmann::json document = tiny_gpt_json();
    document["hiden"] = 3;
    const std::string message = usage_error_text([&] { parse_model_config(document, "t", "t.json"); });
    EXPECT_NE(message.find("\"hiden\""), std::string::npos) << message;
    EXPECT_NE(message.find("t.json"), std::string::npos) << message;
}

TEST(ModelConfig, MissingOrMalformedKeysAreNamed) {
    nlohmann::json missing = tiny_gpt_json();
    missing.erase("vocab");
    EXPECT_NE(usage_error_text([&] { parse_model_config(missing, "t", "t.json"); }).find("\"vocab\""), std::string::npos);
    nlohmann::json negative = tiny_gpt_json();
    negative["layers"] = -1;
    EXPECT_NE(usage_error_text([&] { parse_model_config(negative, "t", "t.json"); }).find("\"layers\""),
              std::string::npos);
    nlohmann::json text = tiny_gpt_json();
    text["hidden"] = "64";
    EXPECT_NE(usage_error_text([&] { parse_model_config(text, "t", "t.json"); }).find("\"hidden\""), std::string::npos);
    nlohmann::json heads = tiny_gpt_json();
    heads["heads"] = 3;
    EXPECT_NE(usage_error_text([&] { parse_model_config(heads, "t", "t.json"); }).find("\"heads\""), std::string::npos);
    nlohmann::json kind = tiny_gpt_json();
    kind["kind"] = "rnn";
    EXPECT_NE(usage_error_text([&] { parse_model_config(kind, "t", "t.json"); }).find("\"kind\""), std::string::npos);
    // An MLP has no heads.
    const nlohmann::json mlp = {{"kind", "mlp"}, {"layers", 2}, {"hidden", 8}, {"heads", 2}};
    EXPECT_NE(usage_error_text([&] { parse_model_config(mlp, "m", "m.json"); }).find("\"heads\""), std::string::npos);
}

TEST(ModelConfig, ShippedModelsLoadByName) {
    for (const char* name : {"gpt-tiny", "gpt-small", "gpt2-124m", "gpt2-350m", "gpt-1.3b", "mlp-tiny", "mlp-deep"}) {
        const ModelConfig config = load_model_config(name);
        EXPECT_EQ(config.name, name);
    }
    EXPECT_NE(usage_error_text([] { load_model_config("no-such-model"); }).find("gpt-tiny"), std::string::npos);
    // GPT-2 small has 124M parameters (with the tied output projection counted once).
    const ModelConfig gpt2 = load_model_config("gpt2-124m");
    const std::size_t parameters = model_parameter_layout(gpt2, gpt2.seq_len).total_numel();
    EXPECT_EQ(parameters, 124439808u);
}

// Every shard initialises its slice alone; put together, any layout gives the same tensors.
TEST(ParameterLayout, InitialisationIsIdenticalForAnySharding) {
    const ModelConfig config = parse_model_config(tiny_gpt_json(), "t", "t.json");
    const ParameterLayout layout = model_parameter_layout(config, config.seq_len);
    const FlatLayout serial(layout, group_units_by_bytes(layout, 1u << 30), 1);
    const std::vector<float> reference = serial.canonical(serial.initial_shard(7, 0));
    ASSERT_EQ(reference.size(), layout.total_numel());
    for (int shards : {1, 2, 3, 4, 7}) {
        for (const UnitGroups& groups :
             {one_unit_per_group(layout), group_units_by_bytes(layout, 4096), group_units_by_bytes(layout, 1u << 30)}) {
            const FlatLayout flat(layout, groups, shards);
            std::vector<float> full(flat.padded_numel());
            for (int r = 0; r < shards; ++r) {
                const std::vector<float> shard = flat.initial_shard(7, r);
                ASSERT_EQ(shard.size(), flat.shard_numel());
                for (const Segment& s : flat.segments()) {
                    EXPECT_EQ(s.padded_numel % static_cast<std::size_t>(shards), 0u);
                    std::copy_n(shard.begin() + static_cast<std::ptrdiff_t>(s.shard_offset), s.shard_numel,
                                full.begin() + static_cast<std::ptrdiff_t>(s.offset + r * s.shard_numel));
                }
            }
            EXPECT_EQ(flat.canonical(full), reference) << shards << " shards, " << groups.size() << " segments";
        }
    }
    // A different seed gives different weights; LayerNorm weights are ones.
    EXPECT_NE(serial.canonical(serial.initial_shard(8, 0)), reference);
    EXPECT_EQ(reference[layout.units()[0].numel + 0], 1.0f);  // h0.ln1w[0]: first tensor of unit 1
}

TEST(ParameterLayout, BucketsCloseBeforeTheLimitInBackwardOrder) {
    ParameterLayout layout;
    for (const char* unit : {"u0", "u1", "u2", "u3"}) {
        layout.add_unit(unit);
        layout.add_tensor("w", {100}, InitKind::zeros);  // 400 bytes each
    }
    const UnitGroups groups = group_units_by_bytes(layout, 800);
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0], std::make_pair(0, 2));
    EXPECT_EQ(groups[1], std::make_pair(2, 4));
    EXPECT_EQ(group_units_by_bytes(layout, 100).size(), 4u);  // a unit above the limit is alone
}

TEST(SyntheticData, SamplesDependOnlyOnTheirGlobalIndex) {
    const int T = 16, V = 50;
    std::vector<int> all_tokens(8 * T), all_targets(8 * T);
    synthetic_tokens(3, 100, 8, T, V, all_tokens, all_targets);
    std::vector<int> tokens(5 * T), targets(5 * T);
    synthetic_tokens(3, 103, 5, T, V, tokens, targets);  // samples 103..107 alone
    EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), all_tokens.begin() + 3 * T));
    EXPECT_TRUE(std::equal(targets.begin(), targets.end(), all_targets.begin() + 3 * T));
    for (int t = 0; t + 1 < T; ++t) EXPECT_EQ(all_targets[t], all_tokens[t + 1]);  // next-token targets
    for (int token : all_tokens) EXPECT_TRUE(token >= 0 && token < V);
    std::vector<int> other(8 * T), other_targets(8 * T);
    synthetic_tokens(4, 100, 8, T, V, other, other_targets);
    EXPECT_NE(other, all_tokens);

    std::vector<float> x(6 * 4), y(6 * 4), x2(2 * 4), y2(2 * 4);
    synthetic_regression(3, 10, 6, 4, x, y);
    synthetic_regression(3, 14, 2, 4, x2, y2);
    EXPECT_TRUE(std::equal(x2.begin(), x2.end(), x.begin() + 16));
    EXPECT_FLOAT_EQ(y[5], std::sin(x[5]));
}

struct TestStore {
    int id = 0;
};

// Two chunks of a 3-layer model, layers 0-1 (kind 0) and layer 2 (kind 1, ends the model).
TEST(KeptActivations, ChunksShareOnePoolAndTakeNoMoreThanItHolds) {
    KeptActivations<TestStore, TestStore, TestStore> pool("Test", {{0, 2}, {2, 3}}, {0, 0, 1});
    float boundary[4] = {};
    pool.add_slot(&boundary[0], &boundary[1]);
    pool.add_slot(&boundary[2], &boundary[3]);
    for (int id : {1, 2, 3}) pool.add_store(0, TestStore{id}, TestStore{-id});
    pool.add_store(1, TestStore{9}, TestStore{-9});
    pool.add_head(TestStore{7});

    auto& first = pool.take(0, 0);
    EXPECT_EQ(first.input, &boundary[0]);
    EXPECT_NE(first.blocks[0].id, 0);
    EXPECT_NE(first.blocks[1].id, 0);
    EXPECT_EQ(first.stash[0].id, -first.blocks[0].id);  // a layer's stash travels with its store
    EXPECT_EQ(first.blocks[2].id, 0);                   // not the chunk's layer
    EXPECT_EQ(&pool.take(0, 0), &first);                // the one it holds
    auto& last = pool.take(0, 1);                       // the same micro-batch on the other chunk
    EXPECT_EQ(last.input, &boundary[2]);
    EXPECT_EQ(last.blocks[2].id, 9);
    EXPECT_EQ(last.head.id, 7);

    auto expect_refused = [&](int microbatch, int chunk, const std::string& what) {
        try {
            pool.take(microbatch, chunk);
            ADD_FAILURE() << "micro-batch " << microbatch << " took " << what << " beyond the pool";
        } catch (const std::logic_error& e) {
            EXPECT_NE(std::string(e.what()).find("Test: taking micro-batch's " + what), std::string::npos) << e.what();
        }
    };
    expect_refused(1, 0, "slots");
    pool.give_back(pool.held(0, 1));
    EXPECT_EQ(pool.held(0, 1).gradient, &boundary[3]);  // given back, its boundary buffers still there
    expect_refused(1, 0, "layer stores");                 // a slot is free, but one kind-0 store only
    EXPECT_EQ(pool.held(0, 1).gradient, &boundary[3]);  // the refused take left it free
    pool.give_back(pool.held(0, 0));
    auto& again = pool.take(1, 0);  // now two stores are free
    EXPECT_EQ(again.input, &boundary[0]);
    EXPECT_THROW(pool.held(0, 0), std::logic_error);  // its slot is taken by another
    EXPECT_EQ(pool.take(1, 1).head.id, 7);           // the head came back too
}

TEST(MicrobatchTokens, ARankOfAContextGroupKeepsItsPositionsOfTheWholeSequences) {
    CpuDevice device;
    MemoryLedger ledger(device);
    ActivationArena arena(ledger);
    const int B = 2, T = 6, V = 40;
    std::vector<int> all_tokens(B * T), all_targets(B * T);
    synthetic_tokens(5, 30, B, T, V, all_tokens, all_targets);

    MicrobatchTokens whole;
    const std::size_t rows = B * T;
    whole.allocate(arena, 2, MicrobatchBuffers{rows, rows, rows});
    whole.stage(device, 1, 5, 30, B, T, V, {});
    EXPECT_TRUE(std::equal(all_tokens.begin(), all_tokens.end(), whole.tokens(1)));
    EXPECT_TRUE(std::equal(all_targets.begin(), all_targets.end(), whole.targets(1)));

    const std::vector<int> positions{4, 0, 5};  // as a zigzag split hands a rank its chunks
    MicrobatchTokens part;
    const std::size_t part_rows = B * positions.size();
    part.allocate(arena, 1, MicrobatchBuffers{part_rows, part_rows, part_rows});
    part.stage(device, 0, 5, 30, B, T, V, positions);
    for (int b = 0; b < B; ++b)
        for (std::size_t i = 0; i < positions.size(); ++i) {
            EXPECT_EQ(part.tokens(0)[b * positions.size() + i], all_tokens[b * T + positions[i]]);
            EXPECT_EQ(part.targets(0)[b * positions.size() + i], all_targets[b * T + positions[i]]);
        }

    for (std::size_t i = 0; i < B * positions.size(); ++i) part.losses(0)[i] = static_cast<float>(i);
    EXPECT_DOUBLE_EQ(part.mean_loss(device, 0), 2.5);
    // Every buffer from the arena, in the ledger's activations: tokens, targets and losses per micro-batch.
    EXPECT_EQ(ledger.usage().live_of(MemoryCategory::activations),
              (2 * B * T + B * positions.size()) * (2 * sizeof(int) + sizeof(float)));
}

TEST(Mesh, TensorParallelInnermostPipelineOutermost) {
    const MeshShape shape{2, 2, 2};  // dp, tp, pp
    const MeshCoordinates at = mesh_coordinates(shape, 5);
    EXPECT_EQ(at.tp, 1);
    EXPECT_EQ(at.dp, 0);
    EXPECT_EQ(at.pp, 1);
    EXPECT_EQ(mesh_rank(shape, at), 5);
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::tp, 5), (std::vector<int>{4, 5}));
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::dp, 5), (std::vector<int>{5, 7}));
    EXPECT_EQ(mesh_group_ranks(shape, MeshDimension::pp, 5), (std::vector<int>{1, 5}));
    // Every dimension's groups partition the world.
    const MeshShape odd{3, 2, 2};
    for (MeshDimension d : {MeshDimension::dp, MeshDimension::tp, MeshDimension::pp}) {
        std::vector<int> seen(static_cast<std::size_t>(odd.world()), 0);
        for (const auto& group : mesh_all_groups(odd, d))
            for (int rank : group) ++seen[static_cast<std::size_t>(rank)];
        EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), odd.world());
    }
    EXPECT_EQ(mesh_all_groups(odd, MeshDimension::dp).size(), 4u);
    EXPECT_EQ(mesh_all_groups(MeshShape{4, 1, 1}, MeshDimension::dp), (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
}

// Megatron-core's rank generator, written from its description (parallel_state.py,
// generate_masked_orthogonal_rank_groups): `sizes` in the order's sequence, the first varying
// fastest; the groups are the ranks that differ only in the masked dimensions, each in the order
// of its masked coordinates (the first fastest).
std::vector<std::vector<int>> megatron_rank_groups(const std::vector<int>& sizes, const std::vector<bool>& mask) {
    std::vector<int> stride(sizes.size(), 1);
    for (std::size_t d = 1; d < sizes.size(); ++d) stride[d] = stride[d - 1] * sizes[d - 1];
    int world = 1, group_size = 1;
    for (std::size_t d = 0; d < sizes.size(); ++d) {
        world *= sizes[d];
        if (mask[d]) group_size *= sizes[d];
    }
    // The rank whose masked coordinates decompose `inside` and unmasked ones `outside`.
    auto compose = [&](int inside, int outside) {
        int rank = 0;
        for (std::size_t d = 0; d < sizes.size(); ++d) {
            int& index = mask[d] ? inside : outside;
            rank += (index % sizes[d]) * stride[d];
            index /= sizes[d];
        }
        return rank;
    };
    std::vector<std::vector<int>> groups;
    for (int group = 0; group < world / group_size; ++group) {
        groups.emplace_back();
        for (int member = 0; member < group_size; ++member) groups.back().push_back(compose(member, group));
    }
    return groups;
}

std::vector<std::vector<int>> groups_of_every_rank(const MeshShape& shape,
                                                   std::vector<int> (*of)(const MeshShape&, int, int), int ep) {
    std::vector<std::vector<int>> groups;
    for (int rank = 0; rank < shape.world(); ++rank) {
        std::vector<int> group = of(shape, ep, rank);
        if (group.front() == rank) groups.push_back(group);
    }
    return groups;
}

TEST(ExpertTensorParallel, RefusalsNameTheFlagAndTheFix) {
    const ModelConfig moe = load_model_config("llama-moe-tiny");
    EXPECT_EQ(usage_error_text([&] { check_expert_tensor_parallel(moe, 1, 2, false); }), "");
    EXPECT_EQ(usage_error_text([&] { check_expert_tensor_parallel(moe, 2, 2, false); }), "");
    for (const auto& [etp, named] : {std::pair{0, "--etp 0:"}, std::pair{-1, "--etp -1:"}}) {
        const std::string message = usage_error_text([&] { check_expert_tensor_parallel(moe, etp, 2, false); });
        EXPECT_NE(message.find(named), std::string::npos) << message;
        EXPECT_NE(message.find("use --etp 1"), std::string::npos) << message;
        EXPECT_EQ(message.find("needs --tp"), std::string::npos) << message;  // not "add --tp 0"
    }
    EXPECT_NE(usage_error_text([&] { check_expert_tensor_parallel(moe, 2, 1, false); }).find("add --tp 2"),
              std::string::npos);
    EXPECT_NE(usage_error_text([&] { check_expert_tensor_parallel(moe, 3, 2, false); }).find("use --etp 1 or --etp 2"),
              std::string::npos);
}

TEST(Mesh, ExpertGroupsInMegatronCoreOrder) {
    // The expert layout (order tp-ep-dp-pp over etp = tp, ep, expert dp = world / (tp x ep x pp))
    // and the dense one's dp x cp group (order tp-cp-ep-dp-pp, ep 1), every group in Megatron-core's
    // group-rank order, for every small mesh and every ep dividing its dp x cp ranks.
    for (int dp = 1; dp <= 4; ++dp)
        for (int cp = 1; cp <= 3; ++cp)
            for (int tp = 1; tp <= 2; ++tp)
                for (int pp = 1; pp <= 2; ++pp)
                    for (int ep = 1; ep <= dp * cp; ++ep) {
                        if ((dp * cp) % ep != 0) continue;
                        const MeshShape shape{dp, tp, pp, cp};
                        SCOPED_TRACE("dp " + std::to_string(dp) + " cp " + std::to_string(cp) + " tp " +
                                     std::to_string(tp) + " pp " + std::to_string(pp) + " ep " + std::to_string(ep));
                        const int expert_dp = shape.world() / (tp * ep * pp);
                        EXPECT_EQ(groups_of_every_rank(shape, mesh_expert_group_ranks, ep),
                                  megatron_rank_groups({tp, ep, expert_dp, pp}, {false, true, false, false}));
                        EXPECT_EQ(groups_of_every_rank(shape, mesh_expert_data_group_ranks, ep),
                                  megatron_rank_groups({tp, ep, expert_dp, pp}, {false, false, true, false}));
                        EXPECT_EQ(mesh_all_groups(shape, MeshDimension::dp_cp),
                                  megatron_rank_groups({tp, cp, dp, pp}, {false, true, true, false}));
                    }
    // dp 2 x cp 2, tp 1, ep 2: the ep groups pair the cp ranks of one dp coordinate (0,1) (2,3),
    // not the dp ranks of one cp coordinate (0,2) (1,3), and the experts' gradients go over (0,2).
    const MeshShape dp2_cp2{2, 1, 1, 2};
    EXPECT_EQ(mesh_expert_group_ranks(dp2_cp2, 2, 3), (std::vector<int>{2, 3}));
    EXPECT_EQ(mesh_expert_data_group_ranks(dp2_cp2, 2, 3), (std::vector<int>{1, 3}));
}

TEST(MemoryLedger, TracksLiveAndPeakPerCategory) {
    CpuDevice device;
    MemoryLedger ledger(device);
    Buffer params = ledger.allocate(MemoryCategory::params, 1000);
    {
        Buffer grads = ledger.allocate(MemoryCategory::grads, 500);
        EXPECT_EQ(ledger.usage().total_live, 1500u);
    }
    Buffer activations = ledger.allocate(MemoryCategory::activations, 800);
    const MemoryUsage usage = ledger.usage();
    EXPECT_EQ(usage.live_of(MemoryCategory::grads), 0u);
    EXPECT_EQ(usage.peak_of(MemoryCategory::grads), 500u);
    EXPECT_EQ(usage.peak_of(MemoryCategory::params), 1000u);
    EXPECT_EQ(usage.peak_of(MemoryCategory::activations), 800u);
    EXPECT_EQ(usage.total_live, 1800u);
    EXPECT_EQ(usage.total_peak, 1800u);
    Buffer copy = params;  // copies share the allocation: counted once
    EXPECT_EQ(ledger.usage().total_live, 1800u);
}

TEST(Metrics, MegatronFlopsOnLiteralCases) {
    // 72 * 1 * 6 * 1 * 1 * (1 + 6/6 + 12/12) = 1296
    EXPECT_DOUBLE_EQ(megatron_gpt_flops(1, 6, 1, 1, 12), 1296.0);
    // GPT-2 small, batch 8 of 1024: 6.9996e12 FLOPs per step
    EXPECT_NEAR(megatron_gpt_flops(8, 1024, 12, 768, 50257), 6999559372800.0, 1.0);
    EXPECT_DOUBLE_EQ(mlp_flops(4, 8, 1024), 6.0 * 4 * 8 * 1024 * 1024);
}

TEST(Metrics, ZeroTheoreticalMemoryPerStage) {
    EXPECT_DOUBLE_EQ(zero_theoretical_memory(1000, 4, 0).total(), 16000.0);
    EXPECT_DOUBLE_EQ(zero_theoretical_memory(1000, 4, 1).total(), 4000.0 + 4000.0 + 2000.0);
    EXPECT_DOUBLE_EQ(zero_theoretical_memory(1000, 4, 2).total(), 4000.0 + 1000.0 + 2000.0);
    EXPECT_DOUBLE_EQ(zero_theoretical_memory(1000, 4, 3).total(), 1000.0 + 1000.0 + 2000.0);
    EXPECT_DOUBLE_EQ(zero_theoretical_memory(1000, 1, 3).total(), 16000.0);
}

TEST(Metrics, PeakTableKnowsCommonGpus) {
    EXPECT_DOUBLE_EQ(*known_gpu_peak("NVIDIA H200", "bf16")->tflops, 989.0);
    EXPECT_DOUBLE_EQ(*known_gpu_peak("NVIDIA A100-SXM4-80GB", "bf16")->tflops, 312.0);
    EXPECT_DOUBLE_EQ(*known_gpu_peak("NVIDIA H100 80GB HBM3", "fp32")->tflops, 67.0);
    EXPECT_FALSE(known_gpu_peak("Some Future GPU", "bf16").has_value());
}

TEST(TrainOptions, LayoutErrorsNameTheFlags) {
    TrainOptions options;
    options.layout.dp = 3;
    const TrainPlan plan = resolve_train_options(options);
    const std::string world = usage_error_text([&] { resolve_train_plan(plan, 4); });
    EXPECT_NE(world.find("--dp 3"), std::string::npos) << world;
    EXPECT_NE(world.find("4"), std::string::npos) << world;

    TrainOptions batch;
    batch.layout.global_batch = 6;
    batch.layout.microbatches = 2;
    const std::string divide = usage_error_text([&] { resolve_train_plan(resolve_train_options(batch), 2); });
    EXPECT_NE(divide.find("--global-batch 6"), std::string::npos) << divide;
    EXPECT_NE(divide.find("--microbatches 2"), std::string::npos) << divide;
    EXPECT_EQ(resolve_train_plan(resolve_train_options(batch), 3).layout.dp, 3);  // dp fills the world

    TrainOptions prefetch;
    prefetch.layout.prefetch = true;
    EXPECT_NE(usage_error_text([&] { resolve_train_options(prefetch); }).find("--zero 3"), std::string::npos);
    TrainOptions zero;
    zero.layout.zero = 4;
    EXPECT_NE(usage_error_text([&] { resolve_train_options(zero); }).find("--zero 4"), std::string::npos);
    TrainOptions seq;
    seq.model = "mlp-tiny";
    seq.seq = 4;
    EXPECT_NE(usage_error_text([&] { resolve_train_options(seq); }).find("--seq"), std::string::npos);
}

TEST(Check, ComparisonFindsTheDifferingTensor) {
    ParameterLayout layout;
    layout.add_unit("u");
    layout.add_tensor("a", {3}, InitKind::zeros);
    layout.add_tensor("b", {2}, InitKind::zeros);
    const std::vector<float> reference{1, 2, 3, 4, 5};
    const CheckResult same = compare_with_reference({2.0, 1.5}, reference, {2.0, 1.5}, reference, layout);
    EXPECT_TRUE(same.passed);
    EXPECT_EQ(same.max_rel_diff_params, 0.0);
    std::vector<float> moved = reference;
    moved[4] += 0.1f;
    const CheckResult off = compare_with_reference({2.0, 1.5}, moved, {2.0, 1.5}, reference, layout);
    EXPECT_FALSE(off.passed);
    EXPECT_EQ(off.worst_tensor, "b");
    const CheckResult loss_off = compare_with_reference({2.0, 1.51}, reference, {2.0, 1.5}, reference, layout);
    EXPECT_FALSE(loss_off.passed);
    EXPECT_NEAR(loss_off.max_rel_diff_loss, 0.01 / 1.5, 1e-12);
    const CheckResult nan = compare_with_reference({2.0, std::nan("")}, reference, {2.0, 1.5}, reference, layout);
    EXPECT_FALSE(nan.passed);
}

TEST(Check, Bf16RunsAreComparedWithBf16Tolerances) {
    ParameterLayout layout;
    layout.add_unit("u");
    layout.add_tensor("a", {2}, InitKind::zeros);
    const std::vector<float> reference{3, 4};  // norm 5
    const std::vector<float> moved{3, 4.1f};   // 2e-2 off: bf16's summation-order noise, not fp32's
    const CheckResult fp32 = compare_with_reference({2.0}, moved, {2.0}, reference, layout);
    EXPECT_FALSE(fp32.passed);
    EXPECT_EQ(fp32.tolerance_params, check_tolerance_params);
    const CheckResult bf16 = compare_with_reference({2.0}, moved, {2.0}, reference, layout, Precision::bf16);
    EXPECT_TRUE(bf16.passed);
    EXPECT_EQ(bf16.tolerance_loss, check_tolerance_loss_bf16);
    EXPECT_EQ(bf16.tolerance_params, check_tolerance_params_bf16);
    // A lost or misplaced shard is still caught.
    EXPECT_FALSE(compare_with_reference({2.0}, {3, 8}, {2.0}, reference, layout, Precision::bf16).passed);
}

// The elements whose exact gradient is zero (train/reference_check.hpp): GPT's key bias at any
// length, and at one token the query and key rows of qkv; Llama's wq and wk (its GQA width) at one
// token, no bias; none in an MLP.
TEST(Check, ZeroGradientElementsAreTheKeyBiasAndAtOneTokenTheQueryAndKey) {
    const ModelConfig gpt = load_model_config("gpt-tiny");
    const auto C = static_cast<std::size_t>(gpt.hidden);
    const std::vector<ZeroGradientElements> long_sequence = zero_gradient_elements(gpt, 8);
    ASSERT_EQ(long_sequence.size(), static_cast<std::size_t>(gpt.layers));
    EXPECT_EQ(long_sequence[1].tensor, "h1.qkvb");
    EXPECT_EQ(long_sequence[1].first, C);
    EXPECT_EQ(long_sequence[1].count, C);
    const std::vector<ZeroGradientElements> one_token = zero_gradient_elements(gpt, 1);
    ASSERT_EQ(one_token.size(), 2u * static_cast<std::size_t>(gpt.layers));
    EXPECT_EQ(one_token[0].tensor, "h0.qkvw");
    EXPECT_EQ(one_token[0].count, 2 * C * C);
    EXPECT_EQ(one_token[1].tensor, "h0.qkvb");
    EXPECT_EQ(one_token[1].count, 2 * C);

    const ModelConfig llama = load_model_config("llama-tiny");
    EXPECT_TRUE(zero_gradient_elements(llama, 8).empty());
    const std::vector<ZeroGradientElements> llama_one = zero_gradient_elements(llama, 1);
    ASSERT_EQ(llama_one.size(), 2u * static_cast<std::size_t>(llama.layers));
    const auto LC = static_cast<std::size_t>(llama.hidden);
    EXPECT_EQ(llama_one[1].tensor, "h0.wk");
    EXPECT_EQ(llama_one[1].count, LC * LC * static_cast<std::size_t>(llama.kv_heads) / static_cast<std::size_t>(llama.heads));
    EXPECT_TRUE(zero_gradient_elements(load_model_config("mlp-tiny"), 1).empty());
}

// Kingma & Ba's bound on one Adam step: lr (1 - β1) / sqrt(1 - β2) when that exceeds lr.
TEST(Check, AdamStepBoundByHand) {
    AdamWSettings adamw;
    adamw.lr = 1e-3f;
    EXPECT_NEAR(adam_step_bound(adamw), 1e-3 * 0.1 / std::sqrt(0.001), 1e-7);  // β2 0.999 (a float): 3.16 lr
    adamw.beta2 = 0.95f;
    EXPECT_NEAR(adam_step_bound(adamw), 1e-3, 1e-7);  // sqrt(0.05) > 0.1: lr
}

// Elements of zero gradient are compared apart, element by element, within 2 steps' bound per
// step; the rest of their tensor is held to the relative tolerance as before.
TEST(Check, ZeroGradientElementsAreBoundedApartElementByElement) {
    ParameterLayout layout;
    layout.add_unit("u");
    layout.add_tensor("h0.qkvb", {6}, InitKind::zeros);
    const std::vector<float> reference{1, 2, 3, 4, 5, 6};
    CheckTolerances tolerances;
    tolerances.zero_gradient = {{"h0.qkvb", 2, 2, "the key bias"}};
    tolerances.zero_gradient_elementwise = 0.5;
    std::vector<float> noisy = reference;
    noisy[2] += 0.4f;  // within 0.5: noise Adam turned into steps
    noisy[3] -= 0.4f;
    const CheckResult noise = compare_with_reference({2.0}, noisy, {2.0}, reference, layout, tolerances);
    EXPECT_TRUE(noise.passed);
    EXPECT_EQ(noise.zero_gradient_elements, 2u);
    EXPECT_EQ(noise.max_rel_diff_params, 0.0);
    EXPECT_NEAR(noise.max_abs_diff_zero_gradient, 0.4, 1e-6);
    noisy[3] -= 0.2f;  // 0.6: more than Adam can move it
    EXPECT_FALSE(compare_with_reference({2.0}, noisy, {2.0}, reference, layout, tolerances).passed);
    std::vector<float> moved = reference;
    moved[5] += 0.1f;  // an element outside them: the relative tolerance
    EXPECT_FALSE(compare_with_reference({2.0}, moved, {2.0}, reference, layout, tolerances).passed);
}

// The loss may drift by check_tolerance_loss_per_step a step (each step's rounding is carried
// into the next), never less than check_tolerance_loss: 1.5e-5 fails at the first step, passes at the tenth.
TEST(Check, LossToleranceGrowsWithTheSteps) {
    ParameterLayout layout;
    layout.add_unit("u");
    layout.add_tensor("a", {1}, InitKind::zeros);
    const std::vector<float> same{1.0f};
    std::vector<double> reference(10, 2.0), early = reference, late = reference;
    early[0] = 2.0 * (1 + 1.5e-5);
    late[9] = 2.0 * (1 + 1.5e-5);
    EXPECT_FALSE(compare_with_reference(early, same, reference, same, layout).passed);
    const CheckResult drifted = compare_with_reference(late, same, reference, same, layout);
    EXPECT_TRUE(drifted.passed);
    EXPECT_NEAR(drifted.tolerance_loss, 10 * check_tolerance_loss_per_step, 1e-12);
    EXPECT_NEAR(drifted.loss_over_tolerance, 1.5e-5 / (10 * check_tolerance_loss_per_step), 1e-6);
}

// A routing flip passes only as a near-tie.
TEST(Check, RoutingFlipsPassOnlyAsNearTies) {
    RoutingComparison routing;
    routing.followed = true;
    routing.near_tie = 1e-3;
    EXPECT_TRUE(routing.passed());
    routing.flips.push_back({3, 17, 5, 2e-7});
    EXPECT_TRUE(routing.passed());
    routing.flips.push_back({1, 4, 0, 0.2});
    EXPECT_FALSE(routing.passed());
}

// train's memory pre-check (cli/memory_check.hpp) against budgets set by the test: a long
// sequence's 10 GiB per rank fits a 16 GiB budget and is refused by an 8 GiB one, in one line
// naming the flags that size it and both numbers; under --ep a rank counts its E/ep experts only.
// (check_train_report.py holds the count equal to the ledger on every train run that fits.)
TEST(TrainMemoryCheck, RefusesWhatDoesNotFitItsBudget) {
    TrainOptions options;
    options.model = "llama-tiny";
    options.seq = 100000;
    const TrainPlan plan = resolve_train_plan(resolve_train_options(options), 1);
    const RankMemory need = train_rank_memory(plan, 0);
    EXPECT_GT(need.total(), 10.0 * (1 << 30));
    EXPECT_LT(need.total(), 11.0 * (1 << 30));
    const auto budget = [](double gib) {
        return RunMemoryBudgets{std::nullopt, MemoryBudget{static_cast<std::uint64_t>(gib * (1 << 30)), "a test's budget"}};
    };
    EXPECT_FALSE(train_memory_refusal(plan, need, budget(16)));
    const std::optional<std::string> refusal = train_memory_refusal(plan, need, budget(8));
    ASSERT_TRUE(refusal);
    EXPECT_EQ(refusal->rfind("--global-batch 8 --seq 100000: the run needs 10.1 GiB per rank", 0), 0u) << *refusal;
    EXPECT_NE(refusal->find("a test's budget leaves 8.0 GiB per rank"), std::string::npos) << *refusal;

    TrainOptions moe;
    moe.model = "llama-moe-tiny";
    const RankMemory whole = train_rank_memory(resolve_train_plan(resolve_train_options(moe), 2), 0);
    moe.layout.ep = 2;
    const RankMemory half = train_rank_memory(resolve_train_plan(resolve_train_options(moe), 2), 0);
    EXPECT_LT(half.of(MemoryCategory::params), whole.of(MemoryCategory::params));

    // A micro-batch the engine cannot index is refused before anything is counted.
    options.layout.global_batch = 1 << 20;
    const std::string rows =
        usage_error_text([&] { train_rank_memory(resolve_train_plan(resolve_train_options(options), 1), 0); });
    EXPECT_EQ(rows.rfind("--global-batch 1048576 --seq 100000: each rank would run a micro-batch", 0), 0u) << rows;
}

TEST(TrainOptions, MoeOverlap1f1bRefusedOnAGpuOnly) {
    TrainPlan plan = resolve_train_options(TrainOptions{});
    EXPECT_NO_THROW(check_backend_moe_overlap_1f1b(plan, true));  // the flag off: nothing to refuse
    plan.layout.moe.a2a_overlap_1f1b = true;
    EXPECT_NO_THROW(check_backend_moe_overlap_1f1b(plan, false));
    const std::string gpu = usage_error_text([&] { check_backend_moe_overlap_1f1b(plan, true); });
    EXPECT_NE(gpu.find("--moe-a2a-overlap-1f1b"), std::string::npos) << gpu;
}

}  // namespace
}  // namespace parbench
