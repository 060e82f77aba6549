#!/usr/bin/env python3
"""PyTorch's time for each op of parbench-ops' gpt-small and llama-small tables (micro-batch 4,
one thread), set beside parbench-ops' own figures: the op-by-op view of scripts/bench/bench_vs_torch.sh.

    build/parbench-ops --benchmark_filter='cpu/(gpt|llama)-small/' --benchmark_format=json > ops.json
    .venv-torch/bin/python scripts/bench/torch_ops.py --parbench-ops ops.json [--json FILE]

Each torch op is timed as parbench-ops times its own: one call, median of --repeats calls after
a warm-up, forward alone and backward alone (torch.autograd.grad of the forward's output).
--clock cpu (default) takes the thread's CPU time on both sides (parbench-ops' cpu_time), which
a machine shared with other work inflates far less than wall time (its real_time); --clock wall
takes wall time. Prints op, parbench us, torch us, their ratio, and parbench's roofline share.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

B, T, C, NH, V = 4, 128, 256, 8, 2048  # parbench-ops' gpt-small shapes
NKV, FFN, EPS, THETA = 4, 688, 1e-5, 10000.0  # and llama-small's (configs/models/llama-small.json)
CLOCK_NAME = "cpu"
N = B * T


CLOCK = {"cpu": time.thread_time, "wall": time.perf_counter}


def median_us(fn, repeats):
    clock = CLOCK[CLOCK_NAME]
    fn()
    samples = []
    for _ in range(repeats):
        start = clock()
        fn()
        samples.append((clock() - start) * 1e6)
    return statistics.median(samples)


def forward_backward(make, repeats):
    """make() -> (output, inputs); times the forward and the backward of output."""
    out, inputs = make()
    grad = torch.randn_like(out)
    forward = median_us(lambda: make(), repeats)
    backward = median_us(lambda: torch.autograd.grad(out, inputs, grad, retain_graph=True), repeats)
    return forward, backward


def param(*shape):
    return torch.randn(*shape, requires_grad=True)


def torch_ops(repeats):
    times = {}
    wte, wpe = param(V, C), param(T, C)
    tokens = torch.randint(0, V, (B, T))
    times["encoder_forward"], times["encoder_backward"] = forward_backward(
        lambda: ((F.embedding(tokens, wte) + wpe), [wte, wpe]), repeats)
    x, w, b = param(N, C), param(C), param(C)
    times["layernorm_forward"], times["layernorm_backward"] = forward_backward(
        lambda: (F.layer_norm(x, (C,), w, b, 1e-5), [x, w, b]), repeats)
    for name, inp, out, bias in (("matmul_qkv", C, 3 * C, True), ("matmul_attproj", C, C, True),
                                 ("matmul_fc", C, 4 * C, True), ("matmul_fcproj", 4 * C, C, True),
                                 ("matmul_lmhead", C, V, False)):
        x, w = param(N, inp), param(out, inp)
        bb = param(out) if bias else None
        inputs = [x, w] + ([bb] if bias else [])
        times[name + "_forward"], times[name + "_backward"] = forward_backward(
            lambda: (F.linear(x, w, bb), inputs), repeats)
    qkv = param(B, T, 3 * C)

    def attention():
        q, k, v = qkv.split(C, dim=2)
        heads = lambda t: t.view(B, T, NH, C // NH).transpose(1, 2)
        return F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True), [qkv]
    times["attention_forward"], times["attention_backward"] = forward_backward(attention, repeats)
    h = param(N, 4 * C)
    times["gelu_forward"], times["gelu_backward"] = forward_backward(
        lambda: (F.gelu(h, approximate="tanh"), [h]), repeats)
    a, r = torch.randn(N, C), torch.randn(N, C)
    times["residual_forward"] = median_us(lambda: a + r, repeats)
    logits, targets = param(N, V), torch.randint(0, V, (N,))
    times["crossentropy_forward"], times["crossentropy_backward"] = forward_backward(
        lambda: (F.cross_entropy(logits, targets, reduction="none"), [logits]), repeats)
    # every parameter of gpt-small in one AdamW step, as parbench-ops' adamw_update
    params = [torch.randn(V + T, C)] + [torch.randn(12 * C * C + 13 * C) for _ in range(4)] + [torch.randn(2 * C)]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    times["adamw_update"] = median_us(optimizer.step, repeats)
    return times


def rope(x, cos, sin):
    """Turns each channel pair (2i, 2i+1) of x (..., hs) by the angles whose cos and sin are given
    (T, hs/2): parbench's layout (kernels/rope_math.hpp), interleaved pairs."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


def torch_llama_ops(repeats):
    """llama-small's own ops, as parbench-ops' llama-small table has them."""
    times = {}
    hs = C // NH
    x, w = param(N, C), param(C)
    times["rmsnorm_forward"], times["rmsnorm_backward"] = forward_backward(
        lambda: (F.rms_norm(x, (C,), w, EPS), [x, w]), repeats)
    gate, up = param(N, FFN), param(N, FFN)
    times["swiglu_forward"], times["swiglu_backward"] = forward_backward(
        lambda: (F.silu(gate) * up, [gate, up]), repeats)
    # the queries' rotation; the angles are a cached buffer in PyTorch models (parbench
    # computes them per call, once per position and pair)
    angles = torch.outer(torch.arange(T, dtype=torch.float32),
                         THETA ** (-2.0 * torch.arange(hs // 2, dtype=torch.float32) / hs))
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    q = param(B, T, NH, hs)
    times["rope_forward"], times["rope_backward"] = forward_backward(lambda: (rope(q, cos, sin), [q]), repeats)
    qh, kh, vh = param(B, NH, T, hs), param(B, NKV, T, hs), param(B, NKV, T, hs)
    times["gqa_attention_forward"], times["gqa_attention_backward"] = forward_backward(
        lambda: (F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, enable_gqa=True), [qh, kh, vh]),
        repeats)
    return times


def parbench_ops(path, clock):
    """{"gpt-small/op": {"us", "roofline"}, "llama-small/op": ...} from a parbench-ops JSON report."""
    with open(path) as f:
        report = json.load(f)
    ops = {}
    for bench in report["benchmarks"]:
        parts = bench["name"].split("/")
        if len(parts) >= 3 and parts[0] == "cpu" and parts[1] in ("gpt-small", "llama-small"):
            scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[bench.get("time_unit", "us")]
            time_key = "cpu_time" if clock == "cpu" else "real_time"
            ops[parts[1] + "/" + parts[2]] = {"us": bench[time_key] * scale, "roofline": bench.get("roofline")}
    return ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parbench-ops", help="parbench-ops --benchmark_format=json output")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--json", help="write the table here")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    args = parser.parse_args()
    global CLOCK_NAME
    CLOCK_NAME = args.clock
    torch.set_num_threads(1)
    times = {"gpt-small/" + op: us for op, us in torch_ops(args.repeats).items()}
    times.update({"llama-small/" + op: us for op, us in torch_llama_ops(args.repeats).items()})
    ours = parbench_ops(args.parbench_ops, args.clock) if args.parbench_ops else {}
    rows = []
    print(f"{'op (B=4)':<36} {'parbench us':>12} {'torch us':>10} {'ratio':>7} {'roofline':>9}"
          f"   ({args.clock} time)")
    for op, torch_us in times.items():
        mine = ours.get(op, {})
        ratio = mine["us"] / torch_us if "us" in mine else None
        rows.append({"op": op, "torch_us": torch_us, "parbench_us": mine.get("us"), "ratio": ratio,
                     "parbench_roofline": mine.get("roofline")})
        fmt = lambda v, spec: format(v, spec) if v is not None else "-"
        print(f"{op:<36} {fmt(mine.get('us'), '12.1f'):>12} {torch_us:10.1f} {fmt(ratio, '7.2f'):>7} "
              f"{fmt(mine.get('roofline'), '9.2f'):>9}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "clock": args.clock, "ops": rows}, f, indent=1)


if __name__ == "__main__":
    main()
