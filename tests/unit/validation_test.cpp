// The validation data: exact in every type, and a wrong element is always counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/collective_harness.hpp"
#include "collectives/collective.hpp"
#include "device/cpu_device.hpp"
#include "kernels/validation_data.hpp"

namespace parbench {
namespace {

// Sum of n ranks' inputs stays below each type's exact-integer limit.
TEST(ValidationData, SumsStayExactInEveryType) {
    for (DType type : all_dtypes())
        for (int nranks : {1, 2, 3, 4, 8, 64, 255}) {
            const auto modulus = choose_modulus(type, ReduceOp::sum, true, nranks);
            EXPECT_LE(static_cast<double>((modulus - 1) * nranks), exact_integer_limit(type))
                << dtype_name(type) << " nranks " << nranks;
        }
}

TEST(ValidationData, ProductIsOneOrTwo) {
    InputPattern pattern{ReduceOp::prod, true, 5, 0, 16};
    ExpectedLayout layout;
    layout.pattern = pattern;
    layout.reduced = true;
    int twos = 0;
    for (std::size_t k = 0; k < 60; ++k) {
        const double value = expected_value(layout, k);
        EXPECT_TRUE(value == 1.0 || value == 2.0);
        twos += value == 2.0;
    }
    EXPECT_GT(twos, 30);  // both values occur, so a constant output is caught
    EXPECT_LT(twos, 60);
}

// Written independently of the shared formulas: block q of rank r's alltoall output is
// block r of rank q's input, whose element j is (j*7 + q*13 + 1) % 100.
TEST(ValidationData, AlltoallLayoutMatchesHandWrittenExpectation) {
    const Collective& alltoall = *find_collective("alltoall");
    const int nranks = 3, rank = 1;
    const std::size_t block = 4, count = block * nranks;
    const InputPattern pattern = input_pattern(alltoall, {DType::int32, ReduceOp::sum, 0}, nranks, rank);
    const ExpectedLayout layout = *alltoall.expected(count, nranks, rank, CollectiveParams{}, pattern);
    for (std::size_t k = 0; k < count; ++k) {
        const std::size_t q = k / block, j = rank * block + k % block;
        EXPECT_EQ(expected_value(layout, k), static_cast<double>((j * 7 + q * 13 + 1) % 100)) << k;
    }
}

// alltoallv under hot:1 at 3 ranks, 30 elements each: the hot rank gets 27 from every rank,
// the cold ones 2 and 1 (collectives/skew.hpp). Block q of rank r's output is rank q's
// block for r, which starts where the blocks of the ranks before r end.
TEST(ValidationData, AlltoallvLayoutMatchesHandWrittenExpectation) {
    const Collective& alltoallv = *find_collective("alltoallv");
    const int nranks = 3;
    const std::size_t count = 30;
    const CollectiveParams params{DType::int32, ReduceOp::sum, 0, parse_skew("hot:1", 11)};
    const std::vector<std::size_t> blocks = destination_counts(count, nranks, params.skew);
    std::vector<std::size_t> sorted = blocks;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<std::size_t>{1, 2, 27}));
    for (int rank = 0; rank < nranks; ++rank) {
        const InputPattern pattern = input_pattern(alltoallv, params, nranks, rank);
        const ExpectedLayout layout = *alltoallv.expected(count, nranks, rank, params, pattern);
        const std::size_t block = blocks[static_cast<std::size_t>(rank)];
        std::size_t start = 0;
        for (int before = 0; before < rank; ++before) start += blocks[static_cast<std::size_t>(before)];
        ASSERT_EQ(alltoallv.shape(count, nranks, rank, params).recv_count, block * nranks);
        for (std::size_t k = 0; k < block * nranks; ++k) {
            const std::size_t q = k / block, j = start + k % block;
            EXPECT_EQ(expected_value(layout, k), static_cast<double>((j * 7 + q * 13 + 1) % 100)) << rank << ' ' << k;
        }
    }
}

// The combine is the dispatch transposed: under the same hot:1 at 3 ranks rank r sends each rank
// back its block r (3 x block r in all) and receives `count` elements, run q (block q long,
// where the blocks before q end) from rank q's send buffer at r x block q. Its traffic is the
// dispatch's with sent and received swapped.
TEST(ValidationData, AlltoallvCombineIsTheDispatchTransposed) {
    const Collective& alltoallv = *find_collective("alltoallv");
    const int nranks = 3;
    const std::size_t count = 30;
    const CollectiveParams dispatch{DType::int32, ReduceOp::sum, 0, parse_skew("hot:1", 11)};
    const CollectiveParams combine{DType::int32, ReduceOp::sum, 0, parse_skew("hot:1", 11), ExchangeDirection::combine};
    const std::vector<std::size_t> blocks = destination_counts(count, nranks, combine.skew);
    for (int rank = 0; rank < nranks; ++rank) {
        const std::size_t block = blocks[static_cast<std::size_t>(rank)];
        const BufferShape shape = alltoallv.shape(count, nranks, rank, combine);
        EXPECT_EQ(shape.send_count, block * nranks);
        EXPECT_EQ(shape.recv_count, count);
        const InputPattern pattern = input_pattern(alltoallv, combine, nranks, rank);
        const std::vector<ExpectedSegment> segments =
            alltoallv.expected_segments(count, nranks, rank, combine, pattern, shape.recv_count);
        ASSERT_EQ(segments.size(), 3u);  // hot:1 at 3 ranks leaves no block empty
        std::size_t start = 0;
        for (int q = 0; q < nranks; ++q) {
            const std::size_t from_q = blocks[static_cast<std::size_t>(q)];
            const ExpectedSegment& segment = segments[static_cast<std::size_t>(q)];
            EXPECT_EQ(segment.offset, start);
            ASSERT_EQ(segment.count, from_q);
            for (std::size_t k = 0; k < from_q; ++k) {
                const std::size_t j = rank * from_q + k;
                EXPECT_EQ(expected_value(segment.layout, k), static_cast<double>((j * 7 + q * 13 + 1) % 100))
                    << rank << ' ' << q << ' ' << k;
            }
            start += from_q;
        }
    }
    const RankTraffic out = *alltoallv.rank_traffic(count, nranks, dispatch);
    const RankTraffic back = *alltoallv.rank_traffic(count, nranks, combine);
    EXPECT_EQ(back.sent, out.received);
    EXPECT_EQ(back.received, out.sent);
}

TEST(ValidationData, ReduceScatterLayoutMatchesHandWrittenExpectation) {
    const Collective& reducescatter = *find_collective("reducescatter");
    const int nranks = 4, rank = 2;
    const std::size_t count = 8 * nranks;
    const InputPattern pattern = input_pattern(reducescatter, {DType::float32, ReduceOp::max, 0}, nranks, rank);
    const ExpectedLayout layout = *reducescatter.expected(count, nranks, rank, CollectiveParams{}, pattern);
    for (std::size_t k = 0; k < 8; ++k) {
        double best = -1;
        for (int q = 0; q < nranks; ++q) best = std::max(best, static_cast<double>((rank * 8 + k + 3 * q) % 16));
        EXPECT_EQ(expected_value(layout, k), best) << k;
    }
}

// A result that is right everywhere but one element has exactly one wrong element, for
// every collective and type.
TEST(ValidationData, CountsEveryCorruptedElement) {
    CpuDevice device;
    for (const Collective* collective : all_collectives()) {
        for (DType type : all_dtypes()) {
            const int nranks = 3, rank = 0, root = 0;
            const std::size_t count = 5 * collective->count_multiple(nranks);
            const CollectiveParams params{type, ReduceOp::sum, root};
            const BufferShape shape = collective->shape(count, nranks, rank, params);
            const InputPattern pattern = input_pattern(*collective, params, nranks, rank);
            const auto layout = collective->expected(count, nranks, rank, params, pattern);
            ASSERT_TRUE(layout.has_value()) << collective->name();
            Buffer result = device.allocate(shape.recv_count * dtype_size(type));
            for (std::size_t k = 0; k < shape.recv_count; ++k)
                store_element(result.data(), k, type, expected_value(*layout, k));
            EXPECT_EQ(device.count_wrong(result, 0, shape.recv_count, type, *layout), 0u);
            store_element(result.data(), shape.recv_count - 1, type,
                          load_element(result.data(), shape.recv_count - 1, type) + 1);
            EXPECT_EQ(device.count_wrong(result, 0, shape.recv_count, type, *layout), 1u)
                << collective->name() << ' ' << dtype_name(type);
        }
    }
}

TEST(ValidationData, AvgAllowsOnlyAFewUlps) {
    ExpectedLayout layout;
    layout.pattern = InputPattern{ReduceOp::avg, true, 3, 0, 16};
    layout.reduced = true;
    const double exact = round_to_type(expected_value(layout, 1), DType::float32);
    EXPECT_TRUE(element_matches(layout, exact, 1, DType::float32));
    EXPECT_TRUE(element_matches(layout, std::nextafter(static_cast<float>(exact), 100.0f), 1, DType::float32));
    EXPECT_FALSE(element_matches(layout, exact + 1e-3, 1, DType::float32));
}

TEST(BusFactors, MatchNcclTestsConventions) {
    const int n = 8;
    EXPECT_DOUBLE_EQ(find_collective("allreduce")->bus_factor(n), 2.0 * 7 / 8);
    for (const char* name : {"allgather", "reducescatter", "alltoall", "alltoallv", "gather", "scatter"})
        EXPECT_DOUBLE_EQ(find_collective(name)->bus_factor(n), 7.0 / 8) << name;
    for (const char* name : {"broadcast", "reduce", "sendrecv"}) EXPECT_DOUBLE_EQ(find_collective(name)->bus_factor(n), 1.0);
    EXPECT_DOUBLE_EQ(find_collective("allreduce")->bus_factor(1), 0.0);
}

}  // namespace
}  // namespace parbench
