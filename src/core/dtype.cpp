#include "core/dtype.hpp"

#include <array>

namespace parbench {
namespace {

struct DTypeInfo {
    DType type;
    std::string_view name;
    std::size_t size;
    bool floating;
};

constexpr std::array<DTypeInfo, 10> dtype_table{{
    {DType::float32, "float32", 4, true},
    {DType::float64, "float64", 8, true},
    {DType::float16, "float16", 2, true},
    {DType::bfloat16, "bfloat16", 2, true},
    {DType::int8, "int8", 1, false},
    {DType::uint8, "uint8", 1, false},
    {DType::int32, "int32", 4, false},
    {DType::uint32, "uint32", 4, false},
    {DType::int64, "int64", 8, false},
    {DType::uint64, "uint64", 8, false},
}};

constexpr std::array<DType, 10> dtype_order{DType::float32, DType::float64, DType::float16, DType::bfloat16,
                                            DType::int8,    DType::uint8,   DType::int32,   DType::uint32,
                                            DType::int64,   DType::uint64};

constexpr std::array<ReduceOp, 5> op_order{ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min,
                                           ReduceOp::avg};

const DTypeInfo& info(DType type) { return dtype_table[static_cast<std::size_t>(type)]; }

}  // namespace

std::size_t dtype_size(DType type) { return info(type).size; }
std::string_view dtype_name(DType type) { return info(type).name; }
bool is_floating(DType type) { return info(type).floating; }
std::span<const DType> all_dtypes() { return dtype_order; }

std::optional<DType> parse_dtype(std::string_view name) {
    for (const auto& entry : dtype_table)
        if (entry.name == name) return entry.type;
    if (name == "float" || name == "fp32") return DType::float32;
    if (name == "double" || name == "fp64") return DType::float64;
    if (name == "half" || name == "fp16") return DType::float16;
    if (name == "bf16") return DType::bfloat16;
    return std::nullopt;
}

std::string_view reduce_op_name(ReduceOp op) {
    switch (op) {
        case ReduceOp::sum: return "sum";
        case ReduceOp::prod: return "prod";
        case ReduceOp::max: return "max";
        case ReduceOp::min: return "min";
        case ReduceOp::avg: return "avg";
    }
    return "?";
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
    for (ReduceOp op : op_order)
        if (reduce_op_name(op) == name) return op;
    return std::nullopt;
}

std::span<const ReduceOp> all_reduce_ops() { return op_order; }

std::optional<std::string> reduce_op_unsupported_reason(ReduceOp op, DType type) {
    if (op == ReduceOp::avg && !is_floating(type))
        return "--op avg needs a floating --dtype (float32, float64, float16, bfloat16); got " +
               std::string(dtype_name(type));
    return std::nullopt;
}

}  // namespace parbench
