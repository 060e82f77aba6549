// The slowest host from literal per-rank figures (bench/host_straggler.hpp).
#include <gtest/gtest.h>

#include "bench/host_straggler.hpp"

namespace parbench {
namespace {

const std::vector<std::string> two_hosts{"a", "a", "b", "b"};

HostStragglerRule train_rule() {
    HostStragglerRule rule;
    rule.min_share_of_samples = 0.75;
    rule.min_samples = 3;
    rule.min_excess_share = 0.25;
    return rule;
}

// Host b's two ranks take turns at being slow (a loaded host): neither rank is the slowest in
// more than half the steps, but b is the slowest host in every step.
TEST(HostStraggler, TheHostWhoseRanksShareTheSlownessIsNamed) {
    const std::vector<std::vector<double>> compute{{10, 10, 10, 10}, {11, 11, 11, 11}, {40, 12, 40, 12}, {12, 40, 12, 40}};
    const auto found = find_host_straggler(compute, two_hosts, train_rule());
    ASSERT_TRUE(found);
    EXPECT_EQ(found->host, "b");
    EXPECT_EQ(found->ranks, 2);
    EXPECT_EQ(found->samples_slowest, 4);
    EXPECT_EQ(found->samples, 4);
    EXPECT_DOUBLE_EQ(found->figure, 26.0);         // (40 + 12) / 2 every step
    EXPECT_DOUBLE_EQ(found->others_median, 10.5);  // host a: (10 + 11) / 2
    EXPECT_DOUBLE_EQ(found->excess, 15.5);
    EXPECT_TRUE(found->consistent);
    ASSERT_EQ(found->median_by_host.size(), 2u);
    EXPECT_EQ(found->median_by_host[0].first, "a");
    EXPECT_DOUBLE_EQ(found->median_by_host[0].second, 10.5);
    EXPECT_EQ(found->median_by_host[1].first, "b");
}

TEST(HostStraggler, SlowestInHalfTheStepsOrByALittleIsNotConsistent) {
    // b slower in steps 0 and 1, a in steps 2 and 3: a coin toss, whatever the margin.
    const std::vector<std::vector<double>> alternating{{10, 10, 40, 40}, {10, 10, 40, 40}, {40, 40, 10, 10}, {40, 40, 10, 10}};
    const auto toss = find_host_straggler(alternating, two_hosts, train_rule());
    ASSERT_TRUE(toss);
    EXPECT_EQ(toss->samples_slowest, 2);
    EXPECT_FALSE(toss->consistent);
    // b always slower, but by 1 ms on 10.5: under a quarter of the other host's time.
    const std::vector<std::vector<double>> close{{10, 10, 10, 10}, {11, 11, 11, 11}, {11, 11, 11, 11}, {12, 12, 12, 12}};
    const auto near = find_host_straggler(close, two_hosts, train_rule());
    ASSERT_TRUE(near);
    EXPECT_EQ(near->host, "b");
    EXPECT_DOUBLE_EQ(near->excess, 1.0);
    EXPECT_FALSE(near->consistent);
    // An absolute floor: 1 ms passes the relative bar of 0 but not a floor of 5.
    HostStragglerRule floor;
    floor.min_excess = 5.0;
    EXPECT_FALSE(find_host_straggler(close, two_hosts, floor)->consistent);
    floor.min_excess = 0.5;
    EXPECT_TRUE(find_host_straggler(close, two_hosts, floor)->consistent);
}

TEST(HostStraggler, TooFewStepsAreNotConsistent) {
    const std::vector<std::vector<double>> compute{{10, 10}, {10, 10}, {40, 40}, {40, 40}};
    const auto found = find_host_straggler(compute, two_hosts, train_rule());
    ASSERT_TRUE(found);
    EXPECT_EQ(found->host, "b");
    EXPECT_FALSE(found->consistent);  // 2 steps, the rule wants 3
}

TEST(HostStraggler, ComparedWithTheMedianOfTheOtherHosts) {
    // Hosts a, b, c of one rank each plus a second rank on c: c's mean (12 + 14) / 2 = 13,
    // b at 30, a at 10: b is named, against the median of a and c, 11.5.
    const std::vector<std::vector<double>> compute{{10, 10, 10}, {30, 30, 30}, {12, 12, 12}, {14, 14, 14}};
    const auto found = find_host_straggler(compute, {"a", "b", "c", "c"}, train_rule());
    ASSERT_TRUE(found);
    EXPECT_EQ(found->host, "b");
    EXPECT_EQ(found->ranks, 1);
    EXPECT_DOUBLE_EQ(found->others_median, 11.5);
    EXPECT_DOUBLE_EQ(found->excess, 18.5);
    EXPECT_TRUE(found->consistent);
}

TEST(HostStraggler, NothingForOneHostOrUnevenInput) {
    const std::vector<std::vector<double>> compute{{10, 10, 10}, {30, 30, 30}};
    EXPECT_FALSE(find_host_straggler(compute, {"a", "a"}, train_rule()));
    EXPECT_FALSE(find_host_straggler(compute, {"a"}, train_rule()));  // a host per rank is needed
    EXPECT_FALSE(find_host_straggler({{10, 10}, {30}}, {"a", "b"}, train_rule()));
    EXPECT_FALSE(find_host_straggler({{}, {}}, {"a", "b"}, train_rule()));
    EXPECT_FALSE(find_host_straggler({}, {}, train_rule()));
}

TEST(HostStraggler, EqualHostsAreNotConsistent) {
    // No excess at all: whichever host the tie names, nothing is consistent.
    const std::vector<std::vector<double>> compute{{10, 10, 10}, {10, 10, 10}, {10, 10, 10}, {10, 10, 10}};
    const auto found = find_host_straggler(compute, two_hosts, HostStragglerRule{});
    ASSERT_TRUE(found);
    EXPECT_DOUBLE_EQ(found->excess, 0.0);
    EXPECT_FALSE(found->consistent);
}

}  // namespace
}  // namespace parbench
