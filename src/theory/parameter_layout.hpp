// Where every parameter lives. A model lists its tensors grouped in units (a layer, or the
// embedding); schemes lay the units out in one flat buffer, grouped in segments (a bucket
// of units for data parallelism and ZeRO-1/2, one unit for ZeRO-3), each segment padded to
// divide by the number of shards. Rank r owns the r-th contiguous slice of every segment,
// so a segment is reduce-scattered or all-gathered with one call (FSDP's FlatParameter,
// arXiv 2304.11277 sec. 3.2, per segment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace parbench {

enum class InitKind { normal, ones, zeros };

// A rectangle [row, row + rows) x [col, col + cols) of a full tensor seen as a matrix (a
// vector of n is n x 1), stored row-major.
struct TensorPiece {
    int row = 0;
    int col = 0;
    int rows = 0;
    int cols = 0;
};

struct TensorSpec {
    std::string name;            // "h0.qkvw"
    std::vector<int> shape;      // e.g. (3C, C); a tensor-parallel shard's local shape
    // A tensor-parallel shard holds pieces of the full tensor the model defines, one after
    // the other (Megatron's column, row, head and vocabulary splits); a whole tensor has none.
    std::vector<int> full_shape;
    std::vector<TensorPiece> pieces;
    std::size_t numel = 0;
    int unit = 0;
    std::size_t offset_in_unit = 0;
    InitKind init = InitKind::zeros;
    float stddev = 0.0f;         // for InitKind::normal
    // The index in the full tensor of element `index` of this tensor (itself when whole).
    std::size_t full_index(std::size_t index) const;
    // The inverse: the element of this tensor at `full_index` of the full tensor (itself when
    // whole); throws std::out_of_range when this tensor's pieces do not hold it.
    std::size_t local_index(std::size_t full_index) const;
    // The tensor's index in the whole model's layout, which seeds its initial values; -1: its
    // index in this layout. Set by select_units, so a pipeline stage starts as the model does.
    int init_id = -1;
};

struct UnitSpec {
    std::string name;  // "embedding", "h0", ...
    // The routed experts of an MoE layer: sharded over the expert-parallel group and reduced over
    // the expert-data-parallel one (theory/expert_parallel.hpp), apart from the dense units.
    bool routed_experts = false;
    std::size_t numel = 0;
    int first_tensor = 0;
    int tensor_count = 0;
};

class ParameterLayout {
  public:
    // Units are appended in order; tensors go into the last unit added.
    int add_unit(const std::string& name, bool routed_experts = false);
    int add_tensor(const std::string& name, std::vector<int> shape, InitKind init, float stddev = 0.0f);
    // The pieces of a full tensor of `full_shape` (1-D or 2-D) that this rank holds; they
    // must share a width. No pieces: the whole tensor, as add_tensor.
    int add_tensor(const std::string& name, std::vector<int> full_shape, std::vector<TensorPiece> pieces,
                   InitKind init, float stddev = 0.0f);

    const std::vector<TensorSpec>& tensors() const { return tensors_; }
    const std::vector<UnitSpec>& units() const { return units_; }
    const TensorSpec& tensor(int index) const { return tensors_.at(static_cast<std::size_t>(index)); }
    std::size_t total_numel() const { return total_; }
    // The layout of `units` alone (ascending), tensors keeping their initialisation: a
    // pipeline stage's share of the model.
    ParameterLayout select_units(const std::vector<int>& units) const;
    // The units that hold routed experts, and the others (ascending).
    std::vector<int> routed_expert_units() const;
    std::vector<int> dense_units() const;

  private:
    std::vector<TensorSpec> tensors_;
    std::vector<UnitSpec> units_;
    std::size_t total_ = 0;
};

struct Segment {
    int first_unit = 0;  // units [first_unit, end_unit)
    int end_unit = 0;
    std::size_t offset = 0;        // in the flat buffer
    std::size_t numel = 0;         // parameters, without padding
    std::size_t padded_numel = 0;  // a multiple of the shard count
    std::size_t shard_numel = 0;   // padded_numel / shards
    std::size_t shard_offset = 0;  // of this segment's slice inside a rank's shard buffer
};

// `order` (units of a layout) restricted to `units` (ascending) and numbered as in
// select_units(units): the use order of one part of a layout.
std::vector<int> select_use_order(const std::vector<int>& order, const std::vector<int>& units);

// Groups of consecutive units [first, end).
using UnitGroups = std::vector<std::pair<int, int>>;

// Buckets for gradient communication: filled in backward order (last unit first), each
// closed before it would exceed `bucket_bytes` (a unit larger than that gets its own).
UnitGroups group_units_by_bytes(const ParameterLayout& layout, std::size_t bucket_bytes);
UnitGroups one_unit_per_group(const ParameterLayout& layout);

class FlatLayout {
  public:
    FlatLayout(const ParameterLayout& layout, const UnitGroups& groups, int shards);

    const std::vector<Segment>& segments() const { return segments_; }
    const Segment& segment_of_unit(int unit) const;
    int segment_index_of_unit(int unit) const { return unit_segment_.at(static_cast<std::size_t>(unit)); }
    std::size_t unit_offset(int unit) const { return unit_offset_.at(static_cast<std::size_t>(unit)); }
    std::size_t padded_numel() const { return padded_; }
    std::size_t shard_numel() const { return padded_ / static_cast<std::size_t>(shards_); }
    std::size_t largest_segment_numel() const;
    int shards() const { return shards_; }

    // Values of the flat positions [begin, end) as the model's initialisation defines them
    // (padding is zero). Depends only on the seed and the tensors, never on the layout.
    void initial_values(std::uint64_t seed, std::size_t begin, std::size_t end, std::span<float> out) const;
    // Rank `shard`'s slices of every segment, concatenated (its shard buffer).
    std::vector<float> initial_shard(std::uint64_t seed, int shard) const;
    // The tensors of a flat buffer in tensor order, padding dropped: comparable across layouts.
    std::vector<float> canonical(std::span<const float> flat) const;

  private:
    const ParameterLayout* layout_;
    int shards_;
    std::vector<Segment> segments_;
    std::vector<int> unit_segment_;
    std::vector<std::size_t> unit_offset_;
    std::size_t padded_ = 0;
};

// The initial value of element `index` of tensor `tensor_id`: a function of the element's
// place in the full tensor, so a shard initialises its slice of the unsharded model.
float initial_value(const TensorSpec& tensor, int tensor_id, std::uint64_t seed, std::size_t index);

}  // namespace parbench
