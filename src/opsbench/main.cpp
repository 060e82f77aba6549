// parbench-ops: Google Benchmark timings of every training op, forward and backward, at the
// shapes of the model configs, on the CPU and on GPU 0 when one is visible. Each benchmark
// reports FLOP/s and bytes/s (op_flops.hpp's conventions) beside two machine yardsticks: a
// large sgemm (compute peak) and a large copy and add (memory bandwidth).
//
// Benchmarks are registered explicitly from main (not by static registration), one table
// per model config, and named <device>/<config>/<op>, e.g. cpu/gpt-small/matmul_fc_forward.
// Time is measured with the device's own Timer (steady clock, or CUDA events on the ops'
// stream) around one op call, so GPU launches are timed on the GPU, not by host syncs.
//
// Roofline (Williams, Waterman & Patterson, CACM 2009): before the benchmarks, each device's
// sgemm peak and "add" memory bandwidth are measured (median of a few calls); every op then
// reports `roofline` = max(FLOP / peak, bytes / bandwidth) / its time, the share of the time
// the faster of the two limits allows that the op achieves (1 = on the roofline), and
// `bound` = 1 where compute is the limit, 0 where memory is. On the CPU both sides of that
// ratio are the thread's CPU time, not wall time, so that a machine shared with other work
// (time sliced away from the benchmark) does not read as a slow op.
//
// --buffer-pages normal|huge (before or among Google Benchmark's flags): the CPU buffers' pages,
// as parbench's flag of that name; the context's buffer_pages says which pages they got.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "device/cpu_device.hpp"
#include "report/environment.hpp"
#include "opsbench/gpu_device.hpp"
#include "theory/mlp_buffers.hpp"
#include "theory/op_flops.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/ops.hpp"

namespace parbench {
namespace {

// Device buffers one benchmark needs, filled once before timing.
class Workspace {
  public:
    explicit Workspace(Device& device) : device_(device) {}

    float* random(std::size_t n) {
        std::vector<float> host(n);
        std::uniform_real_distribution<float> distribution(-1.0f, 1.0f);
        for (float& value : host) value = distribution(engine_);
        return static_cast<float*>(keep(host.data(), n * sizeof(float)));
    }
    float* constant(std::size_t n, float value) {
        const std::vector<float> host(n, value);
        return static_cast<float*>(keep(host.data(), n * sizeof(float)));
    }
    // Contents that do not matter (copies, streams): no host-side random generation.
    Buffer buffer(std::size_t bytes) {
        buffers_.push_back(device_.allocate(bytes));
        return buffers_.back();  // a Buffer shares ownership: the copy stays valid
    }
    int* tokens(std::size_t n, int vocab) {
        std::vector<int> host(n);
        std::uniform_int_distribution<int> distribution(0, vocab - 1);
        for (int& token : host) token = distribution(engine_);
        return static_cast<int*>(keep(host.data(), n * sizeof(int)));
    }

    // 0, 1, ..., n - 1: the positions of a whole sequence.
    int* positions(std::size_t n) {
        std::vector<int> host(n);
        for (std::size_t p = 0; p < n; ++p) host[p] = static_cast<int>(p);
        return static_cast<int*>(keep(host.data(), n * sizeof(int)));
    }

  private:
    void* keep(const void* host, std::size_t bytes) {
        buffers_.push_back(device_.allocate(bytes));
        device_.copy_from_host(buffers_.back(), host, bytes);
        return buffers_.back().data();
    }
    Device& device_;
    std::mt19937 engine_{1234};
    std::vector<Buffer> buffers_;
};

// A device's measured limits: sgemm FLOP/s and streaming bytes/s.
struct Roofline {
    double flops_per_s = 0.0;
    double bytes_per_s = 0.0;
    // The least time an op of this cost can take on the device.
    double seconds(const OpCost& cost) const { return std::max(cost.flops / flops_per_s, cost.bytes / bytes_per_s); }
};

// What one benchmark needs: the device and its ops, both alive for the whole run.
struct Target {
    std::string name;  // "cpu" or "cuda"
    Device* device;
    Ops* ops;
    Roofline roofline;
    bool cpu_clock;  // the roofline share from the thread's CPU time (host ops)
};

double thread_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Sets up buffers, then returns the op call to time.
using Setup = std::function<std::function<void()>(Workspace&, Ops&)>;

void register_op(const Target& target, const std::string& name, OpCost cost, Setup setup) {
    const Roofline roofline = target.roofline;
    benchmark::RegisterBenchmark(name.c_str(),
                                 [target, roofline, cost, setup](benchmark::State& state) {
                                     Workspace workspace(*target.device);
                                     const std::function<void()> op = setup(workspace, *target.ops);
                                     op();  // warm-up: first-call costs (cuBLAS heuristics, caches) untimed
                                     target.ops->synchronize();
                                     const auto timer = target.device->make_timer();
                                     double total_s = 0.0;
                                     for (auto _ : state) {
                                         const double cpu_start = thread_cpu_seconds();
                                         timer->start();
                                         op();
                                         timer->stop();
                                         const double seconds = timer->elapsed_us() * 1e-6;
                                         state.SetIterationTime(seconds);
                                         total_s += target.cpu_clock ? thread_cpu_seconds() - cpu_start : seconds;
                                     }
                                     state.counters["FLOP/s"] = benchmark::Counter(
                                         cost.flops, benchmark::Counter::kIsIterationInvariantRate,
                                         benchmark::Counter::kIs1000);
                                     state.counters["bytes/s"] = benchmark::Counter(
                                         cost.bytes, benchmark::Counter::kIsIterationInvariantRate,
                                         benchmark::Counter::kIs1000);
                                     // least time per call x calls / time taken
                                     state.counters["roofline"] =
                                         roofline.seconds(cost) * static_cast<double>(state.iterations()) / total_s;
                                     state.counters["bound"] =
                                         cost.flops / roofline.flops_per_s >= cost.bytes / roofline.bytes_per_s;
                                 })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
}

void register_adamw(const Target& t, const std::string& prefix, std::size_t params) {
    register_op(t, prefix + "adamw_update", adamw_cost(params), [=](Workspace& w, Ops& ops) {
        float *p = w.random(params), *g = w.random(params), *m = w.random(params), *v = w.constant(params, 0.01f);
        return [=, &ops] { ops.adamw_update(p, g, m, v, params, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10); };
    });
}

// The micro-batch the op shapes are taken at: the configs fix the model, not the batch.
struct GptShape {
    std::string config;
    int B, T, C, NH, V, layers;
};
constexpr int gpt_batch = 4;

void register_gpt(const Target& t, const GptShape& s) {
    const std::string prefix = t.name + "/" + s.config + "/";
    const int B = s.B, T = s.T, C = s.C, NH = s.NH, V = s.V, N = B * T;
    register_op(t, prefix + "encoder_forward", encoder_forward_cost(B, T, C), [=](Workspace& w, Ops& ops) {
        float *out = w.random(N * C), *wte = w.random(V * C), *wpe = w.random(T * C);
        int* tokens = w.tokens(N, V);
        return [=, &ops] { ops.encoder_forward(out, tokens, wte, wpe, B, T, C); };
    });
    register_op(t, prefix + "encoder_backward", encoder_backward_cost(B, T, C), [=](Workspace& w, Ops& ops) {
        float *dout = w.random(N * C), *dwte = w.random(V * C), *dwpe = w.random(T * C);
        int* tokens = w.tokens(N, V);
        return [=, &ops] { ops.encoder_backward(dwte, dwpe, dout, tokens, B, T, C); };
    });
    register_op(t, prefix + "layernorm_forward", layernorm_forward_cost(N, C), [=](Workspace& w, Ops& ops) {
        float *out = w.random(N * C), *mean = w.random(N), *rstd = w.random(N), *inp = w.random(N * C),
              *weight = w.random(C), *bias = w.random(C);
        return [=, &ops] { ops.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C); };
    });
    register_op(t, prefix + "layernorm_backward", layernorm_backward_cost(N, C), [=](Workspace& w, Ops& ops) {
        float *dinp = w.random(N * C), *dweight = w.random(C), *dbias = w.random(C), *dout = w.random(N * C),
              *inp = w.random(N * C), *weight = w.random(C), *mean = w.random(N), *rstd = w.constant(N, 1.0f);
        return [=, &ops] { ops.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C); };
    });
    // the four linear layers of a block and the tied output projection
    struct Linear {
        const char* name;
        int in, out;
        bool bias;
    };
    for (const Linear& linear : {Linear{"matmul_qkv", C, 3 * C, true}, Linear{"matmul_attproj", C, C, true},
                                 Linear{"matmul_fc", C, 4 * C, true}, Linear{"matmul_fcproj", 4 * C, C, true},
                                 Linear{"matmul_lmhead", C, V, false}}) {
        const int IC = linear.in, OC = linear.out;
        const bool has_bias = linear.bias;
        register_op(t, prefix + linear.name + "_forward", matmul_forward_cost(N, IC, OC), [=](Workspace& w, Ops& ops) {
            float *out = w.random(N * OC), *inp = w.random(N * IC), *weight = w.random(OC * IC);
            float* bias = has_bias ? w.random(OC) : nullptr;
            return [=, &ops] { ops.matmul_forward(out, inp, weight, bias, N, IC, OC); };
        });
        register_op(t, prefix + linear.name + "_backward", matmul_backward_cost(N, IC, OC), [=](Workspace& w, Ops& ops) {
            float *dinp = w.random(N * IC), *dweight = w.random(OC * IC), *dout = w.random(N * OC),
                  *inp = w.random(N * IC), *weight = w.random(OC * IC);
            float* dbias = has_bias ? w.random(OC) : nullptr;
            return [=, &ops] { ops.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, IC, OC); };
        });
    }
    const std::size_t scores = static_cast<std::size_t>(B) * NH * T * T;
    register_op(t, prefix + "attention_forward", attention_forward_cost(B, T, C, NH), [=](Workspace& w, Ops& ops) {
        float *out = w.random(N * C), *preatt = w.random(scores), *att = w.random(scores), *qkv = w.random(N * 3 * C);
        return [=, &ops] { ops.attention_forward(out, preatt, att, qkv, B, T, C, NH); };
    });
    register_op(t, prefix + "attention_backward", attention_backward_cost(B, T, C, NH), [=](Workspace& w, Ops& ops) {
        float *dqkv = w.random(N * 3 * C), *dpreatt = w.random(scores), *datt = w.random(scores),
              *dout = w.random(N * C), *qkv = w.random(N * 3 * C), *att = w.constant(scores, 1.0f / T);
        return [=, &ops] { ops.attention_backward(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH); };
    });
    const std::size_t hidden = static_cast<std::size_t>(N) * 4 * C;
    register_op(t, prefix + "gelu_forward", gelu_forward_cost(hidden), [=](Workspace& w, Ops& ops) {
        float *out = w.random(hidden), *inp = w.random(hidden);
        return [=, &ops] { ops.gelu_forward(out, inp, hidden); };
    });
    register_op(t, prefix + "gelu_backward", gelu_backward_cost(hidden), [=](Workspace& w, Ops& ops) {
        float *dinp = w.random(hidden), *inp = w.random(hidden), *dout = w.random(hidden);
        return [=, &ops] { ops.gelu_backward(dinp, inp, dout, hidden); };
    });
    const std::size_t residual = static_cast<std::size_t>(N) * C;
    register_op(t, prefix + "residual_forward", residual_forward_cost(residual), [=](Workspace& w, Ops& ops) {
        float *out = w.random(residual), *a = w.random(residual), *b = w.random(residual);
        return [=, &ops] { ops.residual_forward(out, a, b, residual); };
    });
    register_op(t, prefix + "crossentropy_forward", crossentropy_forward_cost(N, V), [=](Workspace& w, Ops& ops) {
        float *losses = w.random(N), *probs = w.random(N * V), *logits = w.random(N * V);
        int* targets = w.tokens(N, V);
        return [=, &ops] { ops.crossentropy_forward(losses, probs, logits, targets, N, V); };
    });
    register_op(t, prefix + "crossentropy_backward", crossentropy_backward_cost(N, V), [=](Workspace& w, Ops& ops) {
        float *dlogits = w.random(N * V), *dlosses = w.constant(N, 1.0f / N), *probs = w.random(N * V);
        int* targets = w.tokens(N, V);
        return [=, &ops] { ops.crossentropy_backward(dlogits, dlosses, probs, targets, N, V); };
    });
    // every parameter of the model in one update: embeddings, per layer 12 C^2 + 13 C, final layernorm
    const std::size_t params = static_cast<std::size_t>(V + T) * C +
                               static_cast<std::size_t>(s.layers) * (12 * C * C + 13 * C) + 2 * C;
    register_adamw(t, prefix, params);
}

// Llama's own ops at a Llama config's shapes (the linear layers are the GPT table's GEMMs).
struct LlamaShape {
    std::string config;
    int B, T, C, NH, NKV, F;
    float eps, theta;
};

void register_llama(const Target& t, const LlamaShape& s) {
    const std::string prefix = t.name + "/" + s.config + "/";
    const int B = s.B, T = s.T, C = s.C, N = B * T, hs = C / s.NH;
    const float eps = s.eps, theta = s.theta;
    const std::size_t rows = static_cast<std::size_t>(N), width = static_cast<std::size_t>(C);
    register_op(t, prefix + "rmsnorm_forward", rmsnorm_forward_cost(N, C), [=](Workspace& w, Ops& ops) {
        float *out = w.random(rows * width), *rstd = w.random(rows), *inp = w.random(rows * width),
              *weight = w.random(width);
        return [=, &ops] { ops.rmsnorm_forward(out, rstd, inp, weight, N, C, eps); };
    });
    register_op(t, prefix + "rmsnorm_backward", rmsnorm_backward_cost(N, C), [=](Workspace& w, Ops& ops) {
        float *dinp = w.random(rows * width), *dweight = w.random(width), *dout = w.random(rows * width),
              *inp = w.random(rows * width), *weight = w.random(width), *rstd = w.constant(rows, 1.0f);
        return [=, &ops] { ops.rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C); };
    });
    const std::size_t hidden = rows * static_cast<std::size_t>(s.F);
    register_op(t, prefix + "swiglu_forward", swiglu_forward_cost(static_cast<double>(hidden)),
                [=](Workspace& w, Ops& ops) {
                    float *out = w.random(hidden), *gate = w.random(hidden), *up = w.random(hidden);
                    return [=, &ops] { ops.swiglu_forward(out, gate, up, hidden); };
                });
    register_op(t, prefix + "swiglu_backward", swiglu_backward_cost(static_cast<double>(hidden)),
                [=](Workspace& w, Ops& ops) {
                    float *dgate = w.random(hidden), *dup = w.random(hidden), *dout = w.random(hidden),
                          *gate = w.random(hidden), *up = w.random(hidden);
                    return [=, &ops] { ops.swiglu_backward(dgate, dup, dout, gate, up, hidden); };
                });
    // the queries' rotation (the keys' is the same op on NKV heads)
    register_op(t, prefix + "rope_forward", rope_cost(B, T, s.NH, hs), [=](Workspace& w, Ops& ops) {
        float* x = w.random(rows * width);
        const int* positions = w.positions(static_cast<std::size_t>(T));
        return [=, &ops] { ops.rope_forward(x, positions, B, T, s.NH, hs, theta); };
    });
    register_op(t, prefix + "rope_backward", rope_cost(B, T, s.NH, hs), [=](Workspace& w, Ops& ops) {
        float* dx = w.random(rows * width);
        const int* positions = w.positions(static_cast<std::size_t>(T));
        return [=, &ops] { ops.rope_backward(dx, positions, B, T, s.NH, hs, theta); };
    });
    GqaShape shape;
    shape.B = B;
    shape.T = T;
    shape.NH = s.NH;
    shape.NKV = s.NKV;
    shape.hs = hs;
    shape.queries_per_kv = s.NH / s.NKV;
    register_op(t, prefix + "gqa_attention_forward", gqa_attention_forward_cost(B, T, s.NH, s.NKV, hs),
                [=](Workspace& w, Ops& ops) {
                    float *out = w.random(shape.q_elements()), *preatt = w.random(shape.score_elements()),
                          *att = w.random(shape.score_elements()), *q = w.random(shape.q_elements()),
                          *k = w.random(shape.kv_elements()), *v = w.random(shape.kv_elements());
                    return [=, &ops] { ops.gqa_attention_forward(out, preatt, att, q, k, v, shape); };
                });
    register_op(t, prefix + "gqa_attention_backward", gqa_attention_backward_cost(B, T, s.NH, s.NKV, hs),
                [=](Workspace& w, Ops& ops) {
                    float *dq = w.random(shape.q_elements()), *dk = w.random(shape.kv_elements()),
                          *dv = w.random(shape.kv_elements()), *dpreatt = w.random(shape.score_elements()),
                          *datt = w.random(shape.score_elements()), *dout = w.random(shape.q_elements()),
                          *q = w.random(shape.q_elements()), *k = w.random(shape.kv_elements()),
                          *v = w.random(shape.kv_elements()),
                          *att = w.constant(shape.score_elements(), 1.0f / static_cast<float>(T));
                    return [=, &ops] {
                        ops.gqa_attention_backward(dq, dk, dv, dpreatt, datt, dout, q, k, v, att, shape);
                    };
                });
}

// Causal attention at longer sequences, the standard way (gqa_attention_*: the T x T scores and
// probabilities kept) and the block way (block_attention_* over the whole sequence as one causal
// block, FlashAttention-style: nothing of size T x T kept), at llama-small's heads (8 query
// heads, 4 key/value heads of 32). T = 128 at the op table's micro-batch of 4, then 512 tokens
// (T = 256: 2 sequences) and one sequence above: where the block way overtakes the standard one.
void register_attention_lengths(const Target& t) {
    const int NH = 8, NKV = 4, hs = 32;
    for (int T : {128, 256, 512, 1024, 2048}) {
        GqaShape s;
        s.B = T == 128 ? gpt_batch : std::max(1, 512 / T);
        s.T = T;
        s.NH = NH;
        s.NKV = NKV;
        s.hs = hs;
        s.queries_per_kv = NH / NKV;
        const std::string prefix = t.name + "/attention-T" + std::to_string(T) + "/";
        register_op(t, prefix + "standard_forward", gqa_attention_forward_cost(s.B, T, NH, NKV, hs),
                    [=](Workspace& w, Ops& ops) {
                        float *out = w.random(s.q_elements()), *preatt = w.random(s.score_elements()),
                              *att = w.random(s.score_elements()), *q = w.random(s.q_elements()),
                              *k = w.random(s.kv_elements()), *v = w.random(s.kv_elements());
                        return [=, &ops] { ops.gqa_attention_forward(out, preatt, att, q, k, v, s); };
                    });
        register_op(t, prefix + "standard_backward", gqa_attention_backward_cost(s.B, T, NH, NKV, hs),
                    [=](Workspace& w, Ops& ops) {
                        float *dq = w.random(s.q_elements()), *dk = w.random(s.kv_elements()),
                              *dv = w.random(s.kv_elements()), *dpreatt = w.random(s.score_elements()),
                              *datt = w.random(s.score_elements()), *dout = w.random(s.q_elements()),
                              *q = w.random(s.q_elements()), *k = w.random(s.kv_elements()),
                              *v = w.random(s.kv_elements()),
                              *att = w.constant(s.score_elements(), 1.0f / static_cast<float>(T));
                        return [=, &ops] { ops.gqa_attention_backward(dq, dk, dv, dpreatt, datt, dout, q, k, v, att, s); };
                    });
        const AttentionBlock block = attention_block(s, 0, T, 0, T, BlockMask::causal);
        const std::size_t rows = block.query_rows();
        register_op(t, prefix + "block_forward", block_attention_forward_cost(s.B, T, NH, NKV, hs),
                    [=](Workspace& w, Ops& ops) {
                        float *out = w.random(s.q_elements()), *row_max = w.random(rows), *row_sum = w.random(rows),
                              *lse = w.random(rows), *scores = w.random(block.tile_elements()),
                              *q = w.random(s.q_elements()), *k = w.random(s.kv_elements()),
                              *v = w.random(s.kv_elements());
                        return [=, &ops] {
                            ops.block_attention_forward(out, row_max, row_sum, scores, q, k, v, block);
                            ops.block_attention_finish(out, lse, row_max, row_sum, rows, hs);
                        };
                    });
        register_op(t, prefix + "block_backward", block_attention_backward_cost(s.B, T, NH, NKV, hs),
                    [=](Workspace& w, Ops& ops) {
                        float *dq = w.random(s.q_elements()), *dk = w.random(s.kv_elements()),
                              *dv = w.random(s.kv_elements()), *scratch = w.random(2 * block.tile_elements()),
                              *dout = w.random(s.q_elements()), *out = w.random(s.q_elements()),
                              *q = w.random(s.q_elements()), *k = w.random(s.kv_elements()),
                              *v = w.random(s.kv_elements()), *delta = w.random(rows),
                              *lse = w.constant(rows, static_cast<float>(std::log(T)));
                        return [=, &ops] {
                            ops.block_attention_delta(delta, dout, out, rows, hs);
                            ops.block_attention_backward(dq, dk, dv, scratch, dout, q, k, v, lse, delta, block);
                        };
                    });
    }
}

// An MLP layer's linear products.
void register_mlp_matmuls(const Target& t, const std::string& prefix, int N, int C) {
    register_op(t, prefix + "matmul_forward", matmul_forward_cost(N, C, C), [=](Workspace& w, Ops& ops) {
        float *out = w.random(N * C), *inp = w.random(N * C), *weight = w.random(C * C), *bias = w.random(C);
        return [=, &ops] { ops.matmul_forward(out, inp, weight, bias, N, C, C); };
    });
    register_op(t, prefix + "matmul_backward", matmul_backward_cost(N, C, C), [=](Workspace& w, Ops& ops) {
        float *dinp = w.random(N * C), *dweight = w.random(C * C), *dbias = w.random(C), *dout = w.random(N * C),
              *inp = w.random(N * C), *weight = w.random(C * C);
        return [=, &ops] { ops.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, C); };
    });
}

void register_mlp(const Target& t, const std::string& config, int layers, int width, int rows) {
    const std::string prefix = t.name + "/" + config + "/";
    const int N = rows, C = width;
    register_mlp_matmuls(t, prefix, N, C);
    const std::size_t n = static_cast<std::size_t>(N) * C;
    register_op(t, prefix + "gelu_forward", gelu_forward_cost(n), [=](Workspace& w, Ops& ops) {
        float *out = w.random(n), *inp = w.random(n);
        return [=, &ops] { ops.gelu_forward(out, inp, n); };
    });
    register_op(t, prefix + "gelu_backward", gelu_backward_cost(n), [=](Workspace& w, Ops& ops) {
        float *dinp = w.random(n), *inp = w.random(n), *dout = w.random(n);
        return [=, &ops] { ops.gelu_backward(dinp, inp, dout, n); };
    });
    register_op(t, prefix + "mse_forward", mse_forward_cost(N, C), [=](Workspace& w, Ops& ops) {
        float *losses = w.random(N), *pred = w.random(n), *target = w.random(n);
        return [=, &ops] { ops.mse_forward(losses, pred, target, N, C); };
    });
    register_op(t, prefix + "mse_backward", mse_backward_cost(N, C), [=](Workspace& w, Ops& ops) {
        float *dpred = w.random(n), *dlosses = w.constant(N, 1.0f / N), *pred = w.random(n), *target = w.random(n);
        return [=, &ops] { ops.mse_backward(dpred, dlosses, pred, target, N, C); };
    });
    register_adamw(t, prefix, static_cast<std::size_t>(layers) * (C * C + C));
    // One layer's weight gradient and its AdamW, as the step runs them on one rank: unfused (the
    // whole gradient written, then read back by the update, which clears it) and fused
    // (train/models/mlp.cpp: mlp_gradient_piece_rows rows at a time into a buffer that stays in
    // cache, each piece updated at once). The same work; the least traffic is the inputs and the
    // parameters and moments read and written once (the gradient need not leave the cache).
    const std::size_t weights = static_cast<std::size_t>(C) * C;
    const OpCost update_cost{matmul_flops(N, C, C) + adamw_cost(static_cast<double>(weights)).flops,
                             4.0 * (2.0 * static_cast<double>(n) + 6.0 * static_cast<double>(weights))};
    register_op(t, prefix + "weight_gradient_then_adamw", update_cost, [=](Workspace& w, Ops& ops) {
        float *p = w.random(weights), *g = w.constant(weights, 0.0f), *m = w.random(weights),
              *v = w.constant(weights, 0.01f), *dout = w.random(n), *inp = w.random(n);
        return [=, &ops] {
            ops.matmul_backward(nullptr, g, nullptr, dout, inp, nullptr, N, C, C);
            ops.adamw_update_clearing_grads(p, g, m, v, weights, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10);
        };
    });
    if (t.ops->has_weight_gradient_rows()) {
        const int piece_rows = std::min(C, mlp_gradient_piece_rows);
        register_op(t, prefix + "weight_gradient_adamw_fused", update_cost, [=](Workspace& w, Ops& ops) {
            float *p = w.random(weights), *piece = w.random(static_cast<std::size_t>(piece_rows) * C),
                  *m = w.random(weights), *v = w.constant(weights, 0.01f), *dout = w.random(n), *inp = w.random(n);
            return [=, &ops] {
                for (int first = 0; first < C; first += piece_rows) {
                    const int rows = std::min(piece_rows, C - first);
                    const std::size_t at = static_cast<std::size_t>(first) * C, count = static_cast<std::size_t>(rows) * C;
                    ops.matmul_weight_gradient_rows(piece, dout, inp, N, C, C, first, rows);
                    ops.adamw_update(p + at, piece, m + at, v + at, count, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10);
                }
            };
        });
    }
}

// The yardsticks: a GEMM large enough to reach the device's sgemm peak, and streams large
// enough to leave every cache (64 MiB per array on the CPU, 1 GiB on a GPU).
void register_peaks(const Target& t, bool gpu) {
    const std::string prefix = t.name + "/peak/";
    const int gemm = gpu ? 8192 : 1024;
    register_op(t, prefix + "sgemm_" + std::to_string(gemm), {matmul_flops(gemm, gemm, gemm), 3.0 * 4 * gemm * gemm},
                [=](Workspace& w, Ops& ops) {
                    const std::size_t n = static_cast<std::size_t>(gemm) * gemm;
                    float *out = w.constant(n, 0.0f), *a = w.constant(n, 0.5f), *b = w.constant(n, 0.25f);
                    return [=, &ops] { ops.matmul_forward(out, a, b, nullptr, gemm, gemm, gemm); };
                });
    const std::size_t n = (gpu ? std::size_t{1} << 28 : std::size_t{1} << 24);  // floats per array
    register_op(t, prefix + "copy", {0.0, 2.0 * 4 * n}, [=, device = t.device](Workspace& w, Ops&) {
        Buffer source = w.buffer(n * 4), target = w.buffer(n * 4);
        return [=]() mutable { device->copy(target, 0, source, 0, n * 4); };
    });
    // out = a + b: STREAM's "add", three streams of floats
    register_op(t, prefix + "add", residual_forward_cost(n), [=](Workspace& w, Ops& ops) {
        float *out = w.constant(n, 0.0f), *a = w.constant(n, 1.0f), *b = w.constant(n, 2.0f);
        return [=, &ops] { ops.residual_forward(out, a, b, n); };
    });
}

// The median of `calls` timed calls of op, in seconds (after one untimed call): the device's
// timer, or the thread's CPU time.
double median_seconds(Device& device, Ops& ops, const std::function<void()>& op, int calls, bool cpu_clock) {
    op();
    ops.synchronize();
    const auto timer = device.make_timer();
    std::vector<double> seconds;
    for (int call = 0; call < calls; ++call) {
        const double cpu_start = thread_cpu_seconds();
        timer->start();
        op();
        timer->stop();
        seconds.push_back(cpu_clock ? thread_cpu_seconds() - cpu_start : timer->elapsed_us() * 1e-6);
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
}

// The yardsticks of register_peaks, measured once so that every op can be set against them.
Roofline measure_roofline(Device& device, Ops& ops, bool gpu) {
    Workspace w(device);
    const int gemm = gpu ? 8192 : 1024;
    const std::size_t square = static_cast<std::size_t>(gemm) * gemm;
    float *out = w.constant(square, 0.0f), *a = w.constant(square, 0.5f), *b = w.constant(square, 0.25f);
    const double gemm_s =
        median_seconds(device, ops, [&] { ops.matmul_forward(out, a, b, nullptr, gemm, gemm, gemm); }, 5, !gpu);
    const std::size_t n = gpu ? std::size_t{1} << 28 : std::size_t{1} << 24;
    float *sum = w.constant(n, 0.0f), *x = w.constant(n, 1.0f), *y = w.constant(n, 2.0f);
    const double add_s = median_seconds(device, ops, [&] { ops.residual_forward(sum, x, y, n); }, 5, !gpu);
    return Roofline{matmul_flops(gemm, gemm, gemm) / gemm_s, residual_forward_cost(static_cast<double>(n)).bytes / add_s};
}

// mlp-deep's step on one rank: batch 64 (scripts/bench/bench_vs_torch.py), layers of width 1024.
constexpr int mlp_deep_rows = 64, mlp_deep_width = 1024;

void register_device(const Target& t, bool gpu) {
    register_peaks(t, gpu);
    register_gpt(t, GptShape{"gpt-tiny", gpt_batch, 32, 64, 4, 256, 2});
    register_gpt(t, GptShape{"gpt-small", gpt_batch, 128, 256, 8, 2048, 4});
    register_llama(t, LlamaShape{"llama-small", gpt_batch, 128, 256, 8, 4, 688, 1e-5f, 10000.0f});
    register_mlp(t, "mlp-deep", 8, mlp_deep_width, mlp_deep_rows);
    register_attention_lengths(t);
}

std::string roofline_text(const Roofline& roofline) {
    char text[96];
    std::snprintf(text, sizeof text, "sgemm %.1f GFLOP/s, add %.1f GB/s", roofline.flops_per_s / 1e9,
                  roofline.bytes_per_s / 1e9);
    return text;
}

// --buffer-pages normal|huge (device/host_pages.hpp; parbench's flag of the same name), taken
// out of argv before Google Benchmark reads the rest. Throws UsageError for another value.
BufferPages take_buffer_pages(int& argc, char** argv) {
    BufferPages pages = BufferPages::normal;
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string argument = argv[i];
        std::optional<std::string> value;
        if (argument.rfind("--buffer-pages=", 0) == 0) value = argument.substr(std::string("--buffer-pages=").size());
        else if (argument == "--buffer-pages") value = i + 1 < argc ? std::string(argv[++i]) : std::string();
        else argv[kept++] = argv[i];
        if (!value) continue;
        const auto parsed = parse_buffer_pages(*value);
        if (!parsed)
            throw UsageError("--buffer-pages '" + *value +
                             "': use normal (the kernel's THP setting decides, as for any program) or huge");
        pages = *parsed;
    }
    argc = kept;
    argv[argc] = nullptr;
    return pages;
}

}  // namespace
}  // namespace parbench

int main(int argc, char** argv) {
    using namespace parbench;
    BufferPages pages = BufferPages::normal;
    try {
        pages = take_buffer_pages(argc, argv);
    } catch (const UsageError& error) {
        std::fprintf(stderr, "error: %s\n", error.what());
        return 2;
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    try {
        CpuDevice cpu(pages);
        if (const auto read_back = cpu.read_back_pages())
            benchmark::AddCustomContext("buffer_pages",
                                        buffer_pages_line(to_json(buffer_pages_record(*read_back))).substr(2));
        const auto cpu_ops = make_ops(cpu);
        const Roofline cpu_roofline = measure_roofline(cpu, *cpu_ops, false);
        register_device(Target{"cpu", &cpu, cpu_ops.get(), cpu_roofline, true}, false);
        // mlp-deep's products through OpenBLAS as well, beside the skinny GEMMs CpuOps picks there.
        CpuOps openblas_ops(CpuGemm::openblas);
        register_mlp_matmuls(Target{"cpu-openblas", &cpu, &openblas_ops, cpu_roofline, true}, "cpu-openblas/mlp-deep/",
                             mlp_deep_rows, mlp_deep_width);
        benchmark::AddCustomContext("cpu", cpu.name());
        benchmark::AddCustomContext("cpu_roofline", roofline_text(cpu_roofline));

        std::string why_no_gpu;
        const auto gpu = open_first_gpu(why_no_gpu);
        std::unique_ptr<Ops> gpu_ops;
        if (gpu) {
            gpu_ops = make_ops(*gpu);
            const Roofline gpu_roofline = measure_roofline(*gpu, *gpu_ops, true);
            register_device(Target{"cuda", gpu.get(), gpu_ops.get(), gpu_roofline, false}, true);
            benchmark::AddCustomContext("gpu", gpu->name());
            benchmark::AddCustomContext("gpu_roofline", roofline_text(gpu_roofline));
        } else {
            std::fprintf(stderr, "parbench-ops: GPU benchmarks skipped: %s\n", why_no_gpu.c_str());
            benchmark::AddCustomContext("gpu", "skipped: " + why_no_gpu);
        }
        benchmark::RunSpecifiedBenchmarks();
        benchmark::Shutdown();
    } catch (const std::exception& error) {
        std::fprintf(stderr, "error: %s\n", error.what());
        return 1;
    }
    return 0;
}
