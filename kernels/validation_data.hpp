// The data that validates collectives: inputs that depend on rank and index and whose
// reduction is exact in any order (small integers, held in every type without rounding),
// and the layout that says which inputs each output element must equal. Written once for
// host and device: the CPU path loops over these functions, the CUDA kernels call them per
// thread, so a CPU test of the formulas covers the GPU validation too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.hpp"
#include "half_types.hpp"
#include "host_device.hpp"

namespace parbench {

struct InputPattern {
    ReduceOp op = ReduceOp::sum;
    bool reducing = false;  // false: data-movement collective, op is ignored
    int nranks = 1;
    int rank = 0;           // whose input is described
    std::int64_t modulus = 1;
};

// Which inputs an output element k comes from:
//   source rank  = source_rank_from_block ? k / block : fixed_source_rank
//   source index = index_offset + (index_within_block ? k % block : k)
// and, when reduced, the op is applied over all ranks' inputs at the source index.
struct ExpectedLayout {
    InputPattern pattern;
    bool reduced = false;
    bool source_rank_from_block = false;
    int fixed_source_rank = 0;
    std::size_t block = 1;
    std::size_t index_offset = 0;
    bool index_within_block = false;
};

// Largest integer every partial result must stay under to be exact in the type.
PARBENCH_HD double exact_integer_limit(DType type) {
    switch (type) {
        case DType::float16: return 2048.0;
        case DType::bfloat16: return 256.0;
        case DType::float32: return 16777216.0;
        case DType::float64: return 9007199254740992.0;
        case DType::int8: return 127.0;
        case DType::uint8: return 255.0;
        case DType::int32: return 2147483647.0;
        case DType::uint32: return 4294967295.0;
        case DType::int64:
        case DType::uint64: return 9007199254740992.0;  // computed in double on the host
    }
    return 127.0;
}

// Sums of n values below the modulus stay exact; data movement uses a wider range so that
// a misplaced element is unlikely to hold the right value by chance.
PARBENCH_HD std::int64_t choose_modulus(DType type, ReduceOp op, bool reducing, int nranks) {
    if (!reducing) return 100;
    if (op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::prod) return 16;
    const double per_rank = exact_integer_limit(type) / (nranks > 0 ? nranks : 1);
    const double modulus = per_rank + 1.0 < 16.0 ? per_rank + 1.0 : 16.0;
    return modulus < 1.0 ? 1 : static_cast<std::int64_t>(modulus);
}

// prod: exactly one rank of n+1 candidates contributes 2 at each index, the rest 1, so the
// product is 1 or 2 depending on the index and never overflows.
PARBENCH_HD double input_value(const InputPattern& pattern, int rank, std::size_t index) {
    const auto i = static_cast<std::int64_t>(index % 1000003u);
    if (!pattern.reducing) return static_cast<double>((i * 7 + rank * 13 + 1) % pattern.modulus);
    if (pattern.op == ReduceOp::prod) return ((i + rank) % (pattern.nranks + 1) == 0) ? 2.0 : 1.0;
    return static_cast<double>((i + 3 * rank) % pattern.modulus);
}

PARBENCH_HD double expected_value(const ExpectedLayout& layout, std::size_t k) {
    const std::size_t source_index =
        layout.index_offset + (layout.index_within_block ? k % layout.block : k);
    if (!layout.reduced) {
        const int source_rank =
            layout.source_rank_from_block ? static_cast<int>(k / layout.block) : layout.fixed_source_rank;
        return input_value(layout.pattern, source_rank, source_index);
    }
    const InputPattern& pattern = layout.pattern;
    double result = input_value(pattern, 0, source_index);
    for (int rank = 1; rank < pattern.nranks; ++rank) {
        const double value = input_value(pattern, rank, source_index);
        switch (pattern.op) {
            case ReduceOp::sum:
            case ReduceOp::avg: result += value; break;
            case ReduceOp::prod: result *= value; break;
            case ReduceOp::max: result = value > result ? value : result; break;
            case ReduceOp::min: result = value < result ? value : result; break;
        }
    }
    return pattern.op == ReduceOp::avg ? result / pattern.nranks : result;
}

PARBENCH_HD double load_element(const void* base, std::size_t index, DType type) {
    switch (type) {
        case DType::float32: return static_cast<const float*>(base)[index];
        case DType::float64: return static_cast<const double*>(base)[index];
        case DType::float16: return to_float(static_cast<const Half*>(base)[index]);
        case DType::bfloat16: return to_float(static_cast<const BFloat16*>(base)[index]);
        case DType::int8: return static_cast<const std::int8_t*>(base)[index];
        case DType::uint8: return static_cast<const std::uint8_t*>(base)[index];
        case DType::int32: return static_cast<const std::int32_t*>(base)[index];
        case DType::uint32: return static_cast<const std::uint32_t*>(base)[index];
        case DType::int64: return static_cast<double>(static_cast<const std::int64_t*>(base)[index]);
        case DType::uint64: return static_cast<double>(static_cast<const std::uint64_t*>(base)[index]);
    }
    return 0.0;
}

PARBENCH_HD void store_element(void* base, std::size_t index, DType type, double value) {
    switch (type) {
        case DType::float32: static_cast<float*>(base)[index] = static_cast<float>(value); break;
        case DType::float64: static_cast<double*>(base)[index] = value; break;
        case DType::float16: static_cast<Half*>(base)[index] = to_half(static_cast<float>(value)); break;
        case DType::bfloat16: static_cast<BFloat16*>(base)[index] = to_bfloat16(static_cast<float>(value)); break;
        case DType::int8: static_cast<std::int8_t*>(base)[index] = static_cast<std::int8_t>(value); break;
        case DType::uint8: static_cast<std::uint8_t*>(base)[index] = static_cast<std::uint8_t>(value); break;
        case DType::int32: static_cast<std::int32_t*>(base)[index] = static_cast<std::int32_t>(value); break;
        case DType::uint32: static_cast<std::uint32_t*>(base)[index] = static_cast<std::uint32_t>(value); break;
        case DType::int64: static_cast<std::int64_t*>(base)[index] = static_cast<std::int64_t>(value); break;
        case DType::uint64: static_cast<std::uint64_t*>(base)[index] = static_cast<std::uint64_t>(value); break;
    }
}

// The value as the type holds it, so that expected and received are compared bit for bit.
PARBENCH_HD double round_to_type(double value, DType type) {
    switch (type) {
        case DType::float32: return static_cast<float>(value);
        case DType::float16: return to_float(to_half(static_cast<float>(value)));
        case DType::bfloat16: return to_float(to_bfloat16(static_cast<float>(value)));
        default: return value;
    }
}

// avg divides by n, which a backend may do as a multiply by 1/n before summing (NCCL does
// for floats); that rounds differently from sum-then-divide, so avg alone gets a few ulps.
PARBENCH_HD double avg_tolerance(DType type, double expected) {
    double ulp = 0.0;
    switch (type) {
        case DType::float16: ulp = 1.0 / 1024.0; break;
        case DType::bfloat16: ulp = 1.0 / 128.0; break;
        case DType::float32: ulp = 1.0 / 8388608.0; break;
        case DType::float64: ulp = 1.0 / 4503599627370496.0; break;
        default: return 0.0;
    }
    const double magnitude = expected < 0 ? -expected : expected;
    return 4.0 * ulp * (magnitude > 1.0 ? magnitude : 1.0);
}

PARBENCH_HD bool element_matches(const ExpectedLayout& layout, double received, std::size_t k, DType type) {
    const double expected = round_to_type(expected_value(layout, k), type);
    if (layout.reduced && layout.pattern.op == ReduceOp::avg) {
        const double difference = received > expected ? received - expected : expected - received;
        return difference <= avg_tolerance(type, expected);
    }
    return received == expected;
}

}  // namespace parbench
