#include "core/size_parse.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace parbench {
namespace {

TEST(SizeParse, PlainBytesAndBinarySuffixes) {
    EXPECT_EQ(parse_size("8", "--size"), 8u);
    EXPECT_EQ(parse_size("1K", "--size"), 1024u);
    EXPECT_EQ(parse_size("64k", "--size"), 65536u);
    EXPECT_EQ(parse_size("100M", "--size"), 100u * 1024 * 1024);
    EXPECT_EQ(parse_size("1G", "--size"), 1024ull * 1024 * 1024);
    EXPECT_EQ(parse_size("2GiB", "--size"), 2048ull * 1024 * 1024);
    EXPECT_EQ(parse_size("1.5K", "--size"), 1536u);
    EXPECT_EQ(parse_size("4MB", "--size"), 4u * 1024 * 1024);
    EXPECT_EQ(parse_size("16B", "--size"), 16u);
}

TEST(SizeParse, RejectsMalformedZeroAndNegative) {
    for (const char* bad : {"", "0", "-5", "abc", "10X", "1.3", "0.1K", "5KK", "M"}) {
        try {
            parse_size(bad, "--min-bytes");
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const UsageError& error) {
            EXPECT_NE(std::string(error.what()).find("--min-bytes"), std::string::npos) << error.what();
        }
    }
}

TEST(SizeParse, GeometricSweepIncludesBothEnds) {
    const auto sizes = geometric_sizes(8, 64, 2);
    EXPECT_EQ(sizes, (std::vector<std::uint64_t>{8, 16, 32, 64}));
    EXPECT_EQ(geometric_sizes(8, 100, 4), (std::vector<std::uint64_t>{8, 32}));
    EXPECT_EQ(geometric_sizes(1024, 1024, 2), (std::vector<std::uint64_t>{1024}));
}

TEST(SizeParse, LinearSweepStepsByTheIncrementUpToMax) {
    // nccl-tests' -b 1M -e 4M -i 1M: 1, 2, 3, 4 MiB; a max between steps ends the sweep below it.
    EXPECT_EQ(linear_sizes(1 << 20, 4 << 20, 1 << 20),
              (std::vector<std::uint64_t>{1 << 20, 2 << 20, 3 << 20, 4 << 20}));
    EXPECT_EQ(linear_sizes(8, 20, 5), (std::vector<std::uint64_t>{8, 13, 18}));
    EXPECT_EQ(linear_sizes(8, 8, 5), (std::vector<std::uint64_t>{8}));
    EXPECT_EQ(linear_sizes(1, UINT64_MAX, UINT64_MAX - 1).size(), 2u);  // no wrap-around past the largest
}

TEST(SizeParse, FormatsBinaryUnits) {
    EXPECT_EQ(format_size(8), "8B");
    EXPECT_EQ(format_size(1024), "1KiB");
    EXPECT_EQ(format_size(64u * 1024 * 1024), "64MiB");
}

}  // namespace
}  // namespace parbench
