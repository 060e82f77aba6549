#include "theory/parameter_layout.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/counter_rng.hpp"

namespace parbench {

int ParameterLayout::add_unit(const std::string& name, bool routed_experts) {
    units_.push_back(UnitSpec{name, routed_experts, 0, static_cast<int>(tensors_.size()), 0});
    return static_cast<int>(units_.size()) - 1;
}

int ParameterLayout::add_tensor(const std::string& name, std::vector<int> shape, InitKind init, float stddev) {
    if (units_.empty()) throw std::logic_error("ParameterLayout: add a unit before its tensors");
    UnitSpec& unit = units_.back();
    TensorSpec tensor;
    tensor.name = name;
    tensor.numel = 1;
    for (int extent : shape) tensor.numel *= static_cast<std::size_t>(extent);
    tensor.shape = std::move(shape);
    tensor.unit = static_cast<int>(units_.size()) - 1;
    tensor.offset_in_unit = unit.numel;
    tensor.init = init;
    tensor.stddev = stddev;
    unit.numel += tensor.numel;
    ++unit.tensor_count;
    total_ += tensor.numel;
    tensors_.push_back(std::move(tensor));
    return static_cast<int>(tensors_.size()) - 1;
}

int ParameterLayout::add_tensor(const std::string& name, std::vector<int> full_shape, std::vector<TensorPiece> pieces,
                                InitKind init, float stddev) {
    if (pieces.empty()) return add_tensor(name, std::move(full_shape), init, stddev);
    if (full_shape.empty() || full_shape.size() > 2)
        throw std::logic_error("ParameterLayout: tensor " + name + " must be 1-D or 2-D to be split");
    const int full_rows = full_shape[0];
    const int full_cols = full_shape.size() == 2 ? full_shape[1] : 1;
    int rows = 0;
    for (const TensorPiece& piece : pieces) {
        if (piece.cols != pieces.front().cols || piece.row < 0 || piece.col < 0 || piece.rows < 1 || piece.cols < 1 ||
            piece.row + piece.rows > full_rows || piece.col + piece.cols > full_cols)
            throw std::logic_error("ParameterLayout: a piece of tensor " + name + " lies outside it or differs in width");
        rows += piece.rows;
    }
    std::vector<int> shape{rows};
    if (full_shape.size() == 2) shape.push_back(pieces.front().cols);
    const int id = add_tensor(name, std::move(shape), init, stddev);
    tensors_.back().full_shape = std::move(full_shape);
    tensors_.back().pieces = std::move(pieces);
    return id;
}

std::size_t TensorSpec::local_index(std::size_t full_index) const {
    if (pieces.empty()) return full_index;
    const auto full_cols = static_cast<std::size_t>(full_shape.size() == 2 ? full_shape[1] : 1);
    const std::size_t row = full_index / full_cols, col = full_index % full_cols;
    std::size_t before = 0;
    for (const TensorPiece& piece : pieces) {
        const auto first_row = static_cast<std::size_t>(piece.row), first_col = static_cast<std::size_t>(piece.col);
        const auto rows = static_cast<std::size_t>(piece.rows), cols = static_cast<std::size_t>(piece.cols);
        if (row >= first_row && row < first_row + rows && col >= first_col && col < first_col + cols)
            return before + (row - first_row) * cols + (col - first_col);
        before += rows * cols;
    }
    throw std::out_of_range("TensorSpec::local_index: element outside the pieces of tensor " + name);
}

std::vector<int> ParameterLayout::routed_expert_units() const {
    std::vector<int> units;
    for (std::size_t u = 0; u < units_.size(); ++u)
        if (units_[u].routed_experts) units.push_back(static_cast<int>(u));
    return units;
}

std::vector<int> ParameterLayout::dense_units() const {
    std::vector<int> units;
    for (std::size_t u = 0; u < units_.size(); ++u)
        if (!units_[u].routed_experts) units.push_back(static_cast<int>(u));
    return units;
}

std::vector<int> select_use_order(const std::vector<int>& order, const std::vector<int>& units) {
    std::vector<int> selected;
    for (int unit : order) {
        const auto found = std::lower_bound(units.begin(), units.end(), unit);
        if (found != units.end() && *found == unit) selected.push_back(static_cast<int>(found - units.begin()));
    }
    return selected;
}

std::size_t TensorSpec::full_index(std::size_t index) const {
    if (pieces.empty()) return index;
    const auto full_cols = static_cast<std::size_t>(full_shape.size() == 2 ? full_shape[1] : 1);
    for (const TensorPiece& piece : pieces) {
        const std::size_t piece_numel = static_cast<std::size_t>(piece.rows) * static_cast<std::size_t>(piece.cols);
        if (index < piece_numel) {
            const std::size_t row = static_cast<std::size_t>(piece.row) + index / static_cast<std::size_t>(piece.cols);
            const std::size_t col = static_cast<std::size_t>(piece.col) + index % static_cast<std::size_t>(piece.cols);
            return row * full_cols + col;
        }
        index -= piece_numel;
    }
    throw std::out_of_range("TensorSpec::full_index: element outside tensor " + name);
}

ParameterLayout ParameterLayout::select_units(const std::vector<int>& units) const {
    ParameterLayout selected;
    for (int unit : units) {
        const UnitSpec& spec = units_.at(static_cast<std::size_t>(unit));
        selected.add_unit(spec.name, spec.routed_experts);
        for (int id = spec.first_tensor; id < spec.first_tensor + spec.tensor_count; ++id) {
            TensorSpec tensor = tensors_[static_cast<std::size_t>(id)];
            tensor.unit = static_cast<int>(selected.units_.size()) - 1;
            if (tensor.init_id < 0) tensor.init_id = id;
            selected.units_.back().numel += tensor.numel;
            ++selected.units_.back().tensor_count;
            selected.total_ += tensor.numel;
            selected.tensors_.push_back(std::move(tensor));
        }
    }
    return selected;
}

UnitGroups group_units_by_bytes(const ParameterLayout& layout, std::size_t bucket_bytes) {
    UnitGroups groups;
    int end = static_cast<int>(layout.units().size());
    std::size_t bytes = 0;
    for (int unit = end - 1; unit >= 0; --unit) {
        const std::size_t unit_bytes = layout.units()[static_cast<std::size_t>(unit)].numel * sizeof(float);
        if (bytes > 0 && bytes + unit_bytes > bucket_bytes) {
            groups.emplace_back(unit + 1, end);
            end = unit + 1;
            bytes = 0;
        }
        bytes += unit_bytes;
    }
    if (end > 0) groups.emplace_back(0, end);
    std::reverse(groups.begin(), groups.end());  // flat order: first unit first
    return groups;
}

UnitGroups one_unit_per_group(const ParameterLayout& layout) {
    UnitGroups groups;
    for (int unit = 0; unit < static_cast<int>(layout.units().size()); ++unit) groups.emplace_back(unit, unit + 1);
    return groups;
}

FlatLayout::FlatLayout(const ParameterLayout& layout, const UnitGroups& groups, int shards)
    : layout_(&layout), shards_(shards), unit_segment_(layout.units().size(), -1),
      unit_offset_(layout.units().size(), 0) {
    if (shards < 1) throw std::logic_error("FlatLayout: shards must be at least 1");
    std::size_t offset = 0;
    std::size_t shard_offset = 0;
    int expected_unit = 0;
    for (const auto& [first, end] : groups) {
        if (first != expected_unit || end <= first)
            throw std::logic_error("FlatLayout: unit groups must cover the units in order");
        Segment segment;
        segment.first_unit = first;
        segment.end_unit = end;
        segment.offset = offset;
        for (int unit = first; unit < end; ++unit) {
            unit_segment_[static_cast<std::size_t>(unit)] = static_cast<int>(segments_.size());
            unit_offset_[static_cast<std::size_t>(unit)] = offset + segment.numel;
            segment.numel += layout.units()[static_cast<std::size_t>(unit)].numel;
        }
        const auto ways = static_cast<std::size_t>(shards);
        segment.padded_numel = (segment.numel + ways - 1) / ways * ways;
        segment.shard_numel = segment.padded_numel / ways;
        segment.shard_offset = shard_offset;
        offset += segment.padded_numel;
        shard_offset += segment.shard_numel;
        segments_.push_back(segment);
        expected_unit = end;
    }
    if (expected_unit != static_cast<int>(layout.units().size()))
        throw std::logic_error("FlatLayout: unit groups must cover every unit");
    padded_ = offset;
}

const Segment& FlatLayout::segment_of_unit(int unit) const {
    return segments_.at(static_cast<std::size_t>(segment_index_of_unit(unit)));
}

std::size_t FlatLayout::largest_segment_numel() const {
    std::size_t largest = 0;
    for (const Segment& segment : segments_) largest = std::max(largest, segment.padded_numel);
    return largest;
}

float initial_value(const TensorSpec& tensor, int tensor_id, std::uint64_t seed, std::size_t index) {
    switch (tensor.init) {
        case InitKind::ones: return 1.0f;
        case InitKind::zeros: return 0.0f;
        case InitKind::normal:
            return tensor.stddev *
                   counter_normal(seed, static_cast<std::uint64_t>(tensor_id), tensor.full_index(index));
    }
    return 0.0f;
}

void FlatLayout::initial_values(std::uint64_t seed, std::size_t begin, std::size_t end, std::span<float> out) const {
    if (end < begin || out.size() < end - begin) throw std::logic_error("FlatLayout::initial_values: bad range");
    std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(end - begin), 0.0f);  // padding
    const auto& tensors = layout_->tensors();
    for (std::size_t id = 0; id < tensors.size(); ++id) {
        const TensorSpec& tensor = tensors[id];
        const std::size_t start = unit_offset(tensor.unit) + tensor.offset_in_unit;
        const std::size_t lo = std::max(begin, start);
        const std::size_t hi = std::min(end, start + tensor.numel);
        for (std::size_t position = lo; position < hi; ++position)
            out[position - begin] =
                initial_value(tensor, tensor.init_id >= 0 ? tensor.init_id : static_cast<int>(id), seed, position - start);
    }
}

std::vector<float> FlatLayout::initial_shard(std::uint64_t seed, int shard) const {
    std::vector<float> values(shard_numel());
    for (const Segment& segment : segments_) {
        const std::size_t begin = segment.offset + static_cast<std::size_t>(shard) * segment.shard_numel;
        initial_values(seed, begin, begin + segment.shard_numel,
                       std::span<float>(values).subspan(segment.shard_offset, segment.shard_numel));
    }
    return values;
}

std::vector<float> FlatLayout::canonical(std::span<const float> flat) const {
    if (flat.size() != padded_) throw std::logic_error("FlatLayout::canonical: buffer is not this layout's size");
    std::vector<float> values;
    values.reserve(layout_->total_numel());
    for (const TensorSpec& tensor : layout_->tensors()) {
        const std::size_t start = unit_offset(tensor.unit) + tensor.offset_in_unit;
        values.insert(values.end(), flat.begin() + static_cast<std::ptrdiff_t>(start),
                      flat.begin() + static_cast<std::ptrdiff_t>(start + tensor.numel));
    }
    return values;
}

}  // namespace parbench
