// parbench-ops: Google Benchmark timings of every training op, forward and backward, at the
// shapes of the model configs, on the CPU and on GPU 0 when one is visible. Each benchmark
// reports FLOP/s and bytes/s (op_flops.hpp's conventions) beside two machine yardsticks: a
// large sgemm (compute peak) and a large copy and add (memory bandwidth).
//
// Benchmarks are registered explicitly from main (not by static registration), one table
// per model config, and named <device>/<config>/<op>, e.g. cpu/gpt-small/matmul_fc_forward.
// Time is measured with the device's own Timer (steady clock, or CUDA events on the ops'
// stream) around one op call, so GPU launches are timed on the GPU, not by host syncs.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "device/cpu_device.hpp"
#include "opsbench/gpu_device.hpp"
#include "theory/op_flops.hpp"
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

// What one benchmark needs: the device and its ops, both alive for the whole run.
struct Target {
    std::string name;  // "cpu" or "cuda"
    Device* device;
    Ops* ops;
};

// Sets up buffers, then returns the op call to time.
using Setup = std::function<std::function<void()>(Workspace&, Ops&)>;

void register_op(const Target& target, const std::string& name, OpCost cost, Setup setup) {
    benchmark::RegisterBenchmark(name.c_str(),
                                 [target, cost, setup](benchmark::State& state) {
                                     Workspace workspace(*target.device);
                                     const std::function<void()> op = setup(workspace, *target.ops);
                                     op();  // warm-up: first-call costs (cuBLAS heuristics, caches) untimed
                                     target.ops->synchronize();
                                     const auto timer = target.device->make_timer();
                                     for (auto _ : state) {
                                         timer->start();
                                         op();
                                         timer->stop();
                                         state.SetIterationTime(timer->elapsed_us() * 1e-6);
                                     }
                                     state.counters["FLOP/s"] = benchmark::Counter(
                                         cost.flops, benchmark::Counter::kIsIterationInvariantRate,
                                         benchmark::Counter::kIs1000);
                                     state.counters["bytes/s"] = benchmark::Counter(
                                         cost.bytes, benchmark::Counter::kIsIterationInvariantRate,
                                         benchmark::Counter::kIs1000);
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

void register_mlp(const Target& t, const std::string& config, int layers, int width, int rows) {
    const std::string prefix = t.name + "/" + config + "/";
    const int N = rows, C = width;
    register_op(t, prefix + "matmul_forward", matmul_forward_cost(N, C, C), [=](Workspace& w, Ops& ops) {
        float *out = w.random(N * C), *inp = w.random(N * C), *weight = w.random(C * C), *bias = w.random(C);
        return [=, &ops] { ops.matmul_forward(out, inp, weight, bias, N, C, C); };
    });
    register_op(t, prefix + "matmul_backward", matmul_backward_cost(N, C, C), [=](Workspace& w, Ops& ops) {
        float *dinp = w.random(N * C), *dweight = w.random(C * C), *dbias = w.random(C), *dout = w.random(N * C),
              *inp = w.random(N * C), *weight = w.random(C * C);
        return [=, &ops] { ops.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, C); };
    });
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

void register_device(const Target& t, bool gpu) {
    register_peaks(t, gpu);
    register_gpt(t, GptShape{"gpt-tiny", gpt_batch, 32, 64, 4, 256, 2});
    register_gpt(t, GptShape{"gpt-small", gpt_batch, 128, 256, 8, 2048, 4});
    register_mlp(t, "mlp-deep", 8, 1024, 64);
}

}  // namespace
}  // namespace parbench

int main(int argc, char** argv) {
    using namespace parbench;
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    try {
        CpuDevice cpu;
        const auto cpu_ops = make_ops(cpu);
        register_device(Target{"cpu", &cpu, cpu_ops.get()}, false);
        benchmark::AddCustomContext("cpu", cpu.name());

        std::string why_no_gpu;
        const auto gpu = open_first_gpu(why_no_gpu);
        std::unique_ptr<Ops> gpu_ops;
        if (gpu) {
            gpu_ops = make_ops(*gpu);
            register_device(Target{"cuda", gpu.get(), gpu_ops.get()}, true);
            benchmark::AddCustomContext("gpu", gpu->name());
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
