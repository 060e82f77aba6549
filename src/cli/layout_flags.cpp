#include "cli/layout_flags.hpp"

namespace parbench {

void add_model_flags(CLI::App& command, std::string& model, std::optional<int>& seq) {
    command.add_option("--model", model,
                       "Model config NAME in configs/models (gpt-tiny, llama-moe-tiny, gpt3-175b, ...) or a PATH "
                       "(train's default: gpt-tiny)");
    command.add_option("--seq", seq, "Sequence length (default: the model config's seq_len; plan's --params shapes: 2048)");
}

void add_layout_flags(CLI::App& command, LayoutFlags& f) {
    CLI::App& c = command;
    c.add_option("--dp", f.dp, "Data-parallel degree (default: what the world leaves after tp x pp x cp: train's ranks, "
                               "plan's --gpus)");
    c.add_option("--tp", f.tp, "Tensor-parallel degree (Megatron-style split inside each layer)")->capture_default_str();
    c.add_flag("--sp", f.sp, "Sequence parallelism within the tensor-parallel group (needs --tp 2 or more)");
    c.add_option("--pp", f.pp, "Pipeline-parallel degree (stages)")->capture_default_str();
    c.add_option("--schedule", f.schedule, "Pipeline schedule: gpipe, 1f1b, interleaved or zb-h1")->capture_default_str();
    c.add_option("--virtual-stages", f.virtual_stages, "Chunks per pipeline rank (--schedule interleaved)")
        ->capture_default_str();
    c.add_option("--stage-layers", f.stage_layers, "Layers per (virtual) stage, e.g. 3,3,2 (default: balanced)")
        ->delimiter(',');
    c.add_option("--p2p", f.p2p, "Pipeline transfers: nonblocking (isend/irecv) or blocking (send/recv)")
        ->capture_default_str();
    c.add_option("--microbatches", f.microbatches, "Micro-batches per rank per step (gradient accumulation)")
        ->capture_default_str();
    c.add_option("--global-batch", f.global_batch,
                 "Sequences (samples) per step over all ranks (default: 8, train's, which plan --states parbench "
                 "takes too; plan --search the model's trained batch or 4M tokens; one layout one per micro-batch per "
                 "dp rank)");
    c.add_option("--zero", f.zero, "ZeRO stage: 0 (DDP), 1 (optimizer), 2 (+gradients), 3 (+parameters)")
        ->capture_default_str();
    c.add_option("--bucket-mb", f.bucket_mb,
                 "Gradient bucket size in MiB (default 25; ZeRO-2: min(25, 1/4 of the model's gradients))");
    c.add_flag("--overlap", f.overlap, "Start each bucket's gradient collective as soon as it is ready (overlap with "
                                       "backward)");
    c.add_flag("--prefetch", f.prefetch, "ZeRO-3: gather the next layer while computing this one");
    c.add_flag("--tp-comm-overlap", f.tp_comm_overlap,
               "Tensor-parallel all-gathers and reduce-scatters pipelined with their GEMMs, as Megatron-core's "
               "--tp-comm-overlap and torchtitan's async TP run them; needs --sp (plan of a framework's job only; "
               "with --search: every layout with sp)");
    c.add_option("--precision", f.precision,
                 "fp32, or bf16 (bf16 matmuls, fp32 master weights); also which peak MFU is against (default fp32, "
                 "train's, which plan --states parbench takes too; plan otherwise bf16)");
    c.add_option("--recompute", f.recompute,
                 "Activation recompute: none, selective (the attention core), full (each layer's forward) or "
                 "selective-op (torchtitan's op-level policy: every other product and the element-wise ops; plan only)")
        ->capture_default_str();
    c.add_option("--attention", f.attention,
                 "Whole-sequence attention: auto (default), flash (block: the log-sum-exp kept, scores recomputed in "
                 "backward) or naive (standard: the T x T probabilities kept). auto is train's choice, block attention "
                 "from 256 tokens where the backend's block kernels tile (the CPU's), standard on a GPU, and so plan "
                 "--states parbench's (a CPU host: --cores-per-host or a device that is no GPU preset); plan --states "
                 "zero|megatron: flash for bf16 on a GPU device, else naive");
    c.add_option("--cp", f.cp, "Context-parallel degree: ranks that split every sequence (gpt and llama models)")
        ->capture_default_str();
    c.add_option("--cp-style", f.cp_style,
                 "Context-parallel attention: ring (K/V passed around the group, default) or alltoall (sequence to "
                 "heads and back)");
    c.add_option("--cp-balance", f.cp_balance,
                 "Context-parallel causal balance: zigzag (two chunks per rank, one from each end, default) or none "
                 "(contiguous chunks)");
    c.add_option("--ep", f.ep,
                 "Expert-parallel degree (MoE models; default 1): ranks that split the experts, carved from the dp x cp "
                 "ranks (ep consecutive ranks of the dp x cp group, Megatron-core's expert order tp-ep-dp-pp); tokens "
                 "go to their experts' ranks by alltoallv; each rank holds its E/ep experts' parameters, gradients and "
                 "optimizer states, their gradients averaged (ZeRO-sharded) over the dp x cp / ep ranks holding the "
                 "same experts");
    c.add_option("--etp", f.etp,
                 "The experts' tensor parallelism (MoE models): 1 (each tp rank holds its experts whole) or the tp "
                 "degree (each routed expert's first matrices column-parallel, its second row-parallel over the tp "
                 "group, the partial outputs all-reduced over it; Megatron-core's --expert-tensor-parallel-size). "
                 "Default 1 for parbench's engine (train, plan --states parbench), tp for plan --states zero|megatron");
    c.add_flag("--moe-a2a-overlap", f.moe_a2a_overlap,
               "MoE with --ep: each dispatch and combine goes as two non-blocking alltoallv halves, one half's "
               "all-to-all overlapping the other half's expert compute (and the shared experts'); results "
               "bit-identical to the blocking exchange. plan prices half of them exposed, the other half hidden up "
               "to the step's compute");
    c.add_flag("--moe-a2a-overlap-1f1b", f.moe_a2a_overlap_1f1b,
               "MoE with --ep and a --pp 1f1b pipeline: each steady-state forward runs paired with the next backward "
               "(on two fibers of one thread), each posting its dispatch/combine non-blocking and computing the "
               "other's pass while it travels (DualPipe's idea); results bit-identical to blocking. plan hides each "
               "exchange behind the partner pass's compute up to its next switch (a transport that progresses on "
               "its own: NCCL, a NIC); warm-up, cool-down and the last stage blocking");
}

void add_engine_layout_flags(CLI::App& command, LayoutFlags& f) {
    CLI::App& c = command;
    c.add_option("--tp-style", f.tp_style,
                 "megatron (column- then row-parallel pairs) or allgather (MLP: gather every layer's output)")
        ->capture_default_str();
    c.add_option("--moe-expert-capacity-factor", f.moe_capacity_factor,
                 "MoE: each expert takes at most ceil(F x tokens x top_k / experts) of a micro-batch's assignments, "
                 "dropping those of lowest router weight (default: dropless)");
    c.add_option("--moe-aux-loss-coeff", f.moe_aux_loss_coeff,
                 "MoE: weight of the Switch/GShard load-balancing loss (0: off)")
        ->capture_default_str();
    c.add_option("--moe-router-bias-update-rate", f.moe_bias_update_rate,
                 "MoE: DeepSeek-V3's aux-loss-free balancing, each expert's bias moves so much per step (0: off)")
        ->capture_default_str();
}

}  // namespace parbench
