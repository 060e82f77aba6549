#!/usr/bin/env python3
"""The model of a parbench config (gpt, llama or mlp) trained by PyTorch on the CPU, with
parbench's initial parameters and data, so that its losses can be compared with
`parbench train`'s and its step time set beside parbench's (scripts/bench/bench_vs_torch.sh).

Parameters and data are parbench's counter-based random numbers (src/core/counter_rng.hpp,
src/theory/parameter_layout.cpp, src/train/synthetic_data.cpp) recomputed here with numpy, tensor by tensor in
parbench's layout order, so both start from the same weights and see the same samples.

Parallel runs: --nproc N spawns N processes over gloo; --scheme ddp wraps the model in
DistributedDataParallel, --scheme fsdp applies FSDP2's fully_shard to each block and the root
(parbench's --zero 3, one unit per block). Each rank takes its contiguous slice of the global
batch, as parbench's step driver does. One intra-op thread per rank (parbench's
OPENBLAS_NUM_THREADS=1).

Writes JSON: {"loss": [...every step, warm-up first...], "step_time_ms": [...timed steps,
max over ranks...], "parameters": N, "torch": version}. Optional --profile FILE adds the
per-op table of torch.profiler over the timed steps (rank 0).
"""
import argparse
import json
import math
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(x):
    """SplitMix64's finaliser, as parbench's mix64 (wrapping uint64 arithmetic)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def counter_hash(seed, stream, index):
    index = np.asarray(index, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return mix64(np.uint64(seed) ^ mix64(np.uint64(stream) ^ mix64(index)))


def counter_uniform(seed, stream, index):
    bits = (counter_hash(seed, stream, index) >> np.uint64(40)).astype(np.float32)
    return (bits + np.float32(0.5)) / np.float32(16777216.0)  # float32 arithmetic, as in C++


def counter_normal(seed, stream, index):
    u1 = counter_uniform(seed, stream << 1, index).astype(np.float64)
    u2 = counter_uniform(seed, (stream << 1) | 1, index).astype(np.float64)
    return (np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)).astype(np.float32)


TOKEN_STREAM = 0xDA7A0001 << 20
REGRESSION_STREAM = 0xDA7A0002 << 20


def synthetic_tokens(seed, first, count, seq_len, vocab):
    samples = np.arange(first, first + count, dtype=np.uint64)
    start = counter_hash(seed, TOKEN_STREAM, 2 * samples) % np.uint64(vocab)
    stride = np.uint64(1) + counter_hash(seed, TOKEN_STREAM, 2 * samples + np.uint64(1)) % np.uint64(7)
    t = np.arange(seq_len + 1, dtype=np.uint64)
    seq = (start[:, None] + stride[:, None] * t[None, :]) % np.uint64(vocab)
    seq = torch.from_numpy(seq.astype(np.int64))
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def synthetic_regression(seed, first, count, width):
    index = (np.arange(first, first + count, dtype=np.uint64)[:, None] * np.uint64(width) +
             np.arange(width, dtype=np.uint64)[None, :])
    inputs = counter_normal(seed, REGRESSION_STREAM, index)
    return torch.from_numpy(inputs), torch.from_numpy(np.sin(inputs))


class Initialiser:
    """Hands out parbench's initial tensors in layout order (tensor id = position)."""

    def __init__(self, seed):
        self.seed = seed
        self.next_id = 0

    def take(self, shape, kind, stddev=0.0):
        tensor_id = self.next_id
        self.next_id += 1
        numel = int(np.prod(shape))
        if kind == "ones":
            values = np.ones(numel, np.float32)
        elif kind == "zeros":
            values = np.zeros(numel, np.float32)
        else:
            values = np.float32(stddev) * counter_normal(self.seed, tensor_id, np.arange(numel, dtype=np.uint64))
        return torch.nn.Parameter(torch.from_numpy(values.astype(np.float32).reshape(shape)))


def residual_stddev(layers):
    return np.float32(0.02) / np.sqrt(np.float32(2.0 * layers), dtype=np.float32)


class GptBlock(torch.nn.Module):
    def __init__(self, init, C, NH):
        super().__init__()
        self.C, self.NH = C, NH
        self.ln1w, self.ln1b = init.take([C], "ones"), init.take([C], "zeros")
        self.qkvw, self.qkvb = init.take([3 * C, C], "normal", 0.02), init.take([3 * C], "zeros")
        self.attprojw, self.attprojb = init.take([C, C], "normal", init.residual), init.take([C], "zeros")
        self.ln2w, self.ln2b = init.take([C], "ones"), init.take([C], "zeros")
        self.fcw, self.fcb = init.take([4 * C, C], "normal", 0.02), init.take([4 * C], "zeros")
        self.fcprojw, self.fcprojb = init.take([C, 4 * C], "normal", init.residual), init.take([C], "zeros")

    def forward(self, x):
        B, T, C = x.shape
        h = F.layer_norm(x, (C,), self.ln1w, self.ln1b, 1e-5)
        q, k, v = F.linear(h, self.qkvw, self.qkvb).split(C, dim=2)
        heads = lambda t: t.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + F.linear(y.transpose(1, 2).reshape(B, T, C), self.attprojw, self.attprojb)
        h = F.layer_norm(x, (C,), self.ln2w, self.ln2b, 1e-5)
        h = F.gelu(F.linear(h, self.fcw, self.fcb), approximate="tanh")
        return x + F.linear(h, self.fcprojw, self.fcprojb)


class Gpt(torch.nn.Module):
    """parbench's GPT (llm.c's GPT-2): tied embedding, wte wpe lnfw lnfb first in the layout."""

    def __init__(self, config, seed):
        super().__init__()
        C, V, T = config["hidden"], config["vocab"], config["seq_len"]
        init = Initialiser(seed)
        init.residual = residual_stddev(config["layers"])
        self.wte = init.take([V, C], "normal", 0.02)
        self.wpe = init.take([T, C], "normal", 0.02)
        self.lnfw, self.lnfb = init.take([C], "ones"), init.take([C], "zeros")
        self.blocks = torch.nn.ModuleList(GptBlock(init, C, config["heads"]) for _ in range(config["layers"]))

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = F.embedding(tokens, self.wte) + self.wpe[:T]
        for block in self.blocks:
            x = block(x)
        x = F.layer_norm(x, (x.shape[-1],), self.lnfw, self.lnfb, 1e-5)
        logits = F.linear(x, self.wte)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def rope_tables(T, hs, theta):
    """parbench's rope_angle in float32: position * expf(-2i/hs * logf(theta)), pairs (2i, 2i+1)."""
    pair = np.arange(hs // 2, dtype=np.float32)
    exponent = np.float32(-2.0) * pair / np.float32(hs)
    inv = np.exp(exponent * np.log(np.float32(theta)), dtype=np.float32)
    angle = np.arange(T, dtype=np.float32)[:, None] * inv[None, :]
    return torch.from_numpy(np.cos(angle)), torch.from_numpy(np.sin(angle))


def rotate(x, cos, sin):
    """x (B, H, T, hs): each channel pair turned by its angle."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class LlamaBlock(torch.nn.Module):
    def __init__(self, init, config):
        super().__init__()
        C, F_, hs = config["hidden"], config["ffn_hidden"], config["hidden"] // config["heads"]
        self.NH, self.KV, self.eps = config["heads"], config["kv_heads"], config.get("norm_eps", 1e-5)
        self.norm1 = init.take([C], "ones")
        self.wq = init.take([C, C], "normal", 0.02)
        self.wk = init.take([self.KV * hs, C], "normal", 0.02)
        self.wv = init.take([self.KV * hs, C], "normal", 0.02)
        self.wo = init.take([C, C], "normal", init.residual)
        self.norm2 = init.take([C], "ones")
        self.wgate = init.take([F_, C], "normal", 0.02)
        self.wup = init.take([F_, C], "normal", 0.02)
        self.wdown = init.take([C, F_], "normal", init.residual)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        hs = C // self.NH
        h = F.rms_norm(x, (C,), self.norm1, self.eps)
        q = F.linear(h, self.wq).view(B, T, self.NH, hs).transpose(1, 2)
        k = F.linear(h, self.wk).view(B, T, self.KV, hs).transpose(1, 2)
        v = F.linear(h, self.wv).view(B, T, self.KV, hs).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + F.linear(y.transpose(1, 2).reshape(B, T, C), self.wo)
        h = F.rms_norm(x, (C,), self.norm2, self.eps)
        return x + F.linear(F.silu(F.linear(h, self.wgate)) * F.linear(h, self.wup), self.wdown)


class Llama(torch.nn.Module):
    def __init__(self, config, seed):
        super().__init__()
        C, V = config["hidden"], config["vocab"]
        init = Initialiser(seed)
        init.residual = residual_stddev(config["layers"])
        self.wte = init.take([V, C], "normal", 0.02)
        self.blocks = torch.nn.ModuleList(LlamaBlock(init, config) for _ in range(config["layers"]))
        self.norm_final = init.take([C], "ones")
        self.wout = init.take([V, C], "normal", 0.02)
        self.eps = config.get("norm_eps", 1e-5)
        cos, sin = rope_tables(config["seq_len"], C // config["heads"], config.get("rope_theta", 10000.0))
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens, targets):
        x = F.embedding(tokens, self.wte)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        x = F.rms_norm(x, (x.shape[-1],), self.norm_final, self.eps)
        logits = F.linear(x, self.wout)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class MlpLayer(torch.nn.Module):
    def __init__(self, init, H, last):
        super().__init__()
        stddev = np.float32(1.0) / np.sqrt(np.float32(H), dtype=np.float32)
        self.w, self.b = init.take([H, H], "normal", stddev), init.take([H], "zeros")
        self.last = last

    def forward(self, x):
        x = F.linear(x, self.w, self.b)
        return x if self.last else F.gelu(x, approximate="tanh")


class Mlp(torch.nn.Module):
    def __init__(self, config, seed):
        super().__init__()
        init = Initialiser(seed)
        L = config["layers"]
        self.blocks = torch.nn.ModuleList(MlpLayer(init, config["hidden"], l == L - 1) for l in range(L))

    def forward(self, inputs, targets):
        x = inputs
        for block in self.blocks:
            x = block(x)
        return F.mse_loss(x, targets)


def build(config, seed):
    kind = config["kind"]
    if kind == "gpt":
        return Gpt(config, seed)
    if kind == "llama":
        return Llama(config, seed)
    if kind == "mlp":
        return Mlp(config, seed)
    raise SystemExit(f"torch_reference: model kind '{kind}' is not supported (gpt, llama, mlp)")


def batch_of(config, seed, step, global_batch, rank, world):
    local = global_batch // world
    first = step * global_batch + rank * local
    if config["kind"] == "mlp":
        return synthetic_regression(seed, first, local, config["hidden"])
    return synthetic_tokens(seed, first, local, config["seq_len"], config["vocab"])


def run(rank, args, config, port):
    torch.set_num_threads(1)
    world = args.nproc
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    model = build(config, args.seed)
    parameters = sum(p.numel() for p in model.parameters())
    if args.scheme == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    elif args.scheme == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    total = args.warmup + args.steps
    batches = [batch_of(config, args.seed, s, args.global_batch, rank, world) for s in range(total)]
    losses, times = [], []
    profiler = None
    for step in range(total):
        if step == args.warmup and args.profile and rank == 0:
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            profiler.__enter__()
        if world > 1:
            dist.barrier()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(*batches[step])
        loss.backward()
        optimizer.step()
        elapsed = (time.perf_counter() - start) * 1e3
        value = torch.tensor([loss.item(), elapsed], dtype=torch.float64)
        if world > 1:
            mean = value[:1].clone()
            dist.all_reduce(mean)
            dist.all_reduce(value[1:], op=dist.ReduceOp.MAX)
            value[0] = mean[0] / world
        losses.append(float(value[0]))
        if step >= args.warmup:
            times.append(float(value[1]))
    if profiler is not None:
        profiler.__exit__(None, None, None)
    if rank == 0:
        result = {"loss": losses, "step_time_ms": times, "parameters": parameters, "torch": torch.__version__,
                  "scheme": args.scheme, "nproc": world}
        if profiler is not None:
            rows = []
            for event in profiler.key_averages():
                if event.self_cpu_time_total > 0:
                    rows.append({"op": event.key, "calls": event.count,
                                 "self_ms_per_step": event.self_cpu_time_total / 1e3 / args.steps})
            result["profile"] = sorted(rows, key=lambda r: -r["self_ms_per_step"])
        with open(args.json, "w") as out:
            json.dump(result, out)
    if world > 1:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="parbench model config (JSON)")
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--nproc", type=int, default=1)
    parser.add_argument("--scheme", choices=["single", "ddp", "fsdp"], default="single")
    parser.add_argument("--profile", action="store_true", help="add torch.profiler's per-op table (rank 0)")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    with open(args.model) as f:
        config = json.load(f)
    if args.global_batch % args.nproc != 0:
        raise SystemExit("torch_reference: --global-batch must be a multiple of --nproc")
    if (args.scheme == "single") != (args.nproc == 1):
        raise SystemExit("torch_reference: --scheme single needs --nproc 1, ddp and fsdp need --nproc >= 2")
    if args.nproc == 1:
        run(0, args, config, 0)
        return
    with socket.socket() as s:  # a free port for the gloo rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(run, args=(args, config, port), nprocs=args.nproc)


if __name__ == "__main__":
    main()
