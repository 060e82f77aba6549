#include "train/tensor_parallel.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace parbench {
TensorParallelGroup::TensorParallelGroup(Communicator& comm, const TensorSplit& split) : comm_(&comm), split_(split) {
    if (comm.size() != split.size || comm.rank() != split.rank)
        throw std::logic_error("TensorParallelGroup: the split does not match the communicator");
}

int TensorParallelGroup::local_rows(int rows) const {
    return split_.sequence_parallel ? split_extent(rows, split_) : rows;
}

const float* TensorParallelGroup::enter(const float* local, float* full, int rows, int width) {
    if (!split_.sequence_parallel) return local;
    allgather(local, full, static_cast<std::size_t>(local_rows(rows)) * static_cast<std::size_t>(width));
    return full;
}

const float* TensorParallelGroup::leave(float* partial_full, float* local, int rows, int width) {
    if (!split_.sequence_parallel) {
        allreduce_sum(partial_full, static_cast<std::size_t>(rows) * static_cast<std::size_t>(width));
        return partial_full;
    }
    reduce_scatter(partial_full, local, static_cast<std::size_t>(local_rows(rows)) * static_cast<std::size_t>(width));
    return local;
}

const float* TensorParallelGroup::leave_backward(const float* dlocal, float* dfull, int rows, int width) {
    return enter(dlocal, dfull, rows, width);
}

const float* TensorParallelGroup::enter_backward(float* dpartial_full, float* dlocal, int rows, int width) {
    return leave(dpartial_full, dlocal, rows, width);
}

void TensorParallelGroup::allreduce_sum(float* data, std::size_t count) {
    if (split_.size > 1) comm_->allreduce(data, data, count, DType::float32, ReduceOp::sum);
}

void TensorParallelGroup::allreduce_max(float* data, std::size_t count) {
    if (split_.size > 1) comm_->allreduce(data, data, count, DType::float32, ReduceOp::max);
}

void TensorParallelGroup::allgather(const float* send, float* recv, std::size_t count) {
    if (split_.size > 1) {
        comm_->allgather(send, recv, count, DType::float32);
    } else if (send != recv) {
        throw std::logic_error("TensorParallelGroup::allgather on a group of one needs no copy; pass the same buffer");
    }
}

void TensorParallelGroup::reduce_scatter(const float* send, float* recv, std::size_t count) {
    if (split_.size > 1) {
        comm_->reduce_scatter(send, recv, count, DType::float32, ReduceOp::sum);
    } else if (send != recv) {
        throw std::logic_error("TensorParallelGroup::reduce_scatter on a group of one needs no copy; pass the same buffer");
    }
}

std::vector<float> assemble_full_parameters(Communicator& group, Device& device,
                                            const std::vector<float>& local, const ParameterLayout& full_layout,
                                            const std::vector<ParameterLayout>& local_layouts) {
    const auto ranks = static_cast<std::size_t>(group.size());
    const std::size_t bytes = local.size() * sizeof(float);
    // The check path, untimed: buffers of the group's device (GPU memory under NCCL).
    Buffer mine = device.allocate(bytes);
    Buffer gathered = device.allocate(bytes * ranks);
    device.copy_from_host(mine, local.data(), bytes);
    group.allgather(mine.data(), gathered.data(), local.size(), DType::float32);
    std::vector<float> all(local.size() * ranks);
    device.copy_to_host(all.data(), gathered, bytes * ranks);
    if (group.rank() != 0) return {};
    std::vector<std::vector<float>> shards;
    for (std::size_t q = 0; q < ranks; ++q)
        shards.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(q * local.size()),
                            all.begin() + static_cast<std::ptrdiff_t>((q + 1) * local.size()));
    return merge_tensor_parallel_shards(full_layout, local_layouts, shards);
}

std::vector<float> merge_tensor_parallel_shards(const ParameterLayout& full_layout,
                                                const std::vector<ParameterLayout>& local_layouts,
                                                const std::vector<std::vector<float>>& shards) {
    const std::size_t ranks = shards.size();
    if (local_layouts.size() != ranks) throw std::logic_error("merge_tensor_parallel_shards: one layout per shard");
    for (std::size_t q = 0; q < ranks; ++q)
        if (local_layouts[q].total_numel() != shards[q].size() ||
            local_layouts[q].tensors().size() != full_layout.tensors().size())
            throw std::logic_error("merge_tensor_parallel_shards: a shard does not fit its layout");

    // Offsets of each tensor in the canonical (tensor-ordered) vectors.
    auto offsets_of = [](const ParameterLayout& layout) {
        std::vector<std::size_t> offsets;
        std::size_t offset = 0;
        for (const TensorSpec& tensor : layout.tensors()) {
            offsets.push_back(offset);
            offset += tensor.numel;
        }
        return offsets;
    };
    const std::vector<std::size_t> full_offsets = offsets_of(full_layout);
    std::vector<float> full(full_layout.total_numel(), 0.0f);
    std::vector<char> written(full.size(), 0);
    for (std::size_t q = 0; q < ranks; ++q) {
        const ParameterLayout& layout = local_layouts[q];
        const std::vector<std::size_t> local_offsets = offsets_of(layout);
        const float* values = shards[q].data();
        for (std::size_t id = 0; id < layout.tensors().size(); ++id) {
            const TensorSpec& tensor = layout.tensors()[id];
            for (std::size_t i = 0; i < tensor.numel; ++i) {
                // The full layout may itself hold a piece of the tensor (the rank's tp piece
                // when the shards split the routed experts only).
                const std::size_t at = full_offsets[id] + full_layout.tensors()[id].local_index(tensor.full_index(i));
                const float value = values[local_offsets[id] + i];
                if (written[at] && std::memcmp(&full[at], &value, sizeof value) != 0)
                    throw std::runtime_error("parameter check: the replicas of " + tensor.name +
                                             " differ between ranks 0 and " + std::to_string(q) +
                                             " of a tensor- or expert-parallel group");
                full[at] = value;
                written[at] = 1;
            }
        }
    }
    if (std::find(written.begin(), written.end(), 0) != written.end())
        throw std::logic_error("assemble_full_parameters: the shards do not cover the model");
    return full;
}

}  // namespace parbench
