// Element types and reduction operators that every collective is described in.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace parbench {

enum class DType { float32, float64, float16, bfloat16, int8, uint8, int32, uint32, int64, uint64 };
enum class ReduceOp { sum, prod, max, min, avg };

std::size_t dtype_size(DType type);
std::string_view dtype_name(DType type);
std::optional<DType> parse_dtype(std::string_view name);
std::span<const DType> all_dtypes();
bool is_floating(DType type);

std::string_view reduce_op_name(ReduceOp op);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);
std::span<const ReduceOp> all_reduce_ops();

// Why the pair cannot be reduced, or nothing when it can: avg divides, which is only
// defined exactly for floating types (NCCL's integer avg truncates; MPI has none).
std::optional<std::string> reduce_op_unsupported_reason(ReduceOp op, DType type);

}  // namespace parbench
