// NCCL Inspector's records (report/inspector_log.hpp) and the in-job table beside a benchmark
// (report/inspector_compare.hpp), on the recorded-form logs of tests/data/inspector and a report
// written out here.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "report/inspector_compare.hpp"
#include "report/inspector_log.hpp"

namespace parbench {
namespace {

std::string read_data(const std::string& name) {
    std::ifstream file(std::string(PARBENCH_TEST_DATA) + "/inspector/" + name);
    std::ostringstream text;
    text << file.rdbuf();
    return text.str();
}

std::vector<InspectorRecord> sample_records() {
    std::vector<InspectorRecord> records = parse_inspector_log(read_data("job-node-1-pid4101.log"), "pid4101.log");
    for (InspectorRecord& r : parse_inspector_log(read_data("job-node-1-pid4102.log"), "pid4102.log"))
        records.push_back(r);
    return records;
}

// A benchmark on 2 ranks of one host: allreduce at 1 MiB (4 GB/s) and 4 MiB (5 GB/s, in place 9).
LabelledReport bench_report() {
    nlohmann::json results = nlohmann::json::array();
    const auto point = [](const char* collective, std::uint64_t bytes, bool inplace, double busbw) {
        return nlohmann::json{{"collective", collective}, {"bytes", bytes}, {"dtype", "float32"}, {"op", "sum"},
                              {"inplace", inplace}, {"busbw_gbps", busbw}, {"time_us", {{"median", 1.0}}}};
    };
    results.push_back(point("allreduce", 1048576, false, 4.0));
    results.push_back(point("allreduce", 1048576, true, 4.2));
    results.push_back(point("allreduce", 4194304, true, 9.0));
    results.push_back(point("allreduce", 4194304, false, 5.0));
    return {"bench.json", {{"schema", "parbench.report/v1"},
                           {"status", "complete"},
                           {"environment", {{"world_size", 2}, {"hosts", {"vm"}}}},
                           {"results", results}}};
}

TEST(InspectorLog, ReadsRecordsInParbenchsSizeConvention) {
    const std::string text = read_data("job-node-1-pid4101.log");
    EXPECT_TRUE(looks_like_inspector_log(text));
    EXPECT_FALSE(looks_like_inspector_log("{\"schema\": \"parbench.report/v1\"}"));
    EXPECT_FALSE(looks_like_inspector_log("not json"));
    const std::vector<InspectorRecord> records = parse_inspector_log(text, "pid4101.log");
    ASSERT_EQ(records.size(), 5u);  // the Send record has no benchmark point
    EXPECT_EQ(records[0].collective, "allreduce");
    EXPECT_EQ(records[0].bytes, 1048576u);
    EXPECT_DOUBLE_EQ(records[0].exec_time_us, 500.0);
    EXPECT_EQ(records[0].host, "job-node-1");
    EXPECT_EQ(records[0].n_ranks, 2);
    // AllGather's message is one rank's share: parbench's size is the whole gathered buffer.
    EXPECT_EQ(records[2].collective, "allgather");
    EXPECT_EQ(records[2].message_bytes, 524288u);
    EXPECT_EQ(records[2].bytes, 1048576u);
}

TEST(InspectorLog, RefusesDamagedLinesNamingFileLineAndKey) {
    try {
        parse_inspector_log("\n{\"coll_perf\": 1}\n", "job.log");
        FAIL() << "expected a refusal";
    } catch (const UsageError& error) {
        EXPECT_NE(std::string(error.what()).find("job.log:2"), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find("header"), std::string::npos) << error.what();
    }
    EXPECT_THROW(parse_inspector_log("{not json\n", "job.log"), UsageError);
    const std::string bad_rank = R"({"header": {"rank": 5, "n_ranks": 2, "nnodes": 1}, "coll_perf": {"coll": "AllReduce",
        "coll_msg_size_bytes": 8, "coll_exec_time_us": 1, "coll_algobw_gbs": 0, "coll_busbw_gbs": 0}})";
    std::string one_line = bad_rank;
    std::erase(one_line, '\n');
    EXPECT_THROW(parse_inspector_log(one_line, "job.log"), UsageError);
}

TEST(InspectorCompare, SetsEachBucketBesideTheBenchmarkWithAVerdict) {
    const InJobComparison comparison = compare_in_job(sample_records(), {bench_report()});
    EXPECT_EQ(comparison.records, 10u);
    EXPECT_EQ(comparison.untimed_records, 2u);
    ASSERT_EQ(comparison.rows.size(), 3u);  // allgather 1 MiB, allreduce 1 MiB, allreduce 4 MiB
    const InJobRow& gather = comparison.rows[0];
    EXPECT_EQ(gather.collective, "allgather");
    EXPECT_EQ(gather.verdict, "no benchmark point");
    EXPECT_FALSE(gather.ratio.has_value());

    const InJobRow& small = comparison.rows[1];
    EXPECT_EQ(small.collective, "allreduce");
    EXPECT_EQ(small.bucket_bytes, 1048576u);
    EXPECT_EQ(small.records, 4u);
    EXPECT_EQ(small.operations, 2u);
    EXPECT_EQ(small.hosts, 1u);
    // Busbw of 500, 520, 480, 495 us at 1 MiB: median of the four records, 1048576 / 497.5 us.
    EXPECT_NEAR(small.job_busbw_gbps, 1048576.0 / 497.5 / 1e3, 1e-3);
    ASSERT_TRUE(small.bench_busbw_gbps.has_value());
    EXPECT_DOUBLE_EQ(*small.bench_busbw_gbps, 4.0);  // the out-of-place half
    EXPECT_NEAR(*small.ratio, small.job_busbw_gbps / 4.0, 1e-12);
    EXPECT_EQ(small.verdict, "ok");  // 0.53 x: above the LOW bound of 0.5

    const InJobRow& large = comparison.rows[2];
    EXPECT_EQ(large.bench_bytes, 4194304u);
    EXPECT_DOUBLE_EQ(*large.bench_busbw_gbps, 5.0);
    EXPECT_EQ(large.verdict, "ok");  // 5.95 / 5.0 = 1.19, under the 1.2 of "above benchmark"

    // Against a faster benchmark the same job is LOW, and the table says so.
    LabelledReport faster = bench_report();
    for (auto& entry : faster.document["results"]) entry["busbw_gbps"] = 20.0;
    const InJobComparison low = compare_in_job(sample_records(), {faster});
    EXPECT_EQ(low.rows[1].verdict, "LOW");
    EXPECT_NE(render(low, CompareFormat::console).find("LOW"), std::string::npos);
    EXPECT_NE(render(low, CompareFormat::csv).find("allreduce,1048576,2,1,4,"), std::string::npos);
}

TEST(InspectorCompare, MatchesOnlyTheSameGroupSize) {
    LabelledReport four_ranks = bench_report();
    four_ranks.document["environment"]["world_size"] = 4;
    const InJobComparison comparison = compare_in_job(sample_records(), {four_ranks});
    for (const InJobRow& row : comparison.rows) EXPECT_EQ(row.verdict, "no benchmark point");
    EXPECT_THROW(compare_in_job({}, {bench_report()}), UsageError);
}

}  // namespace
}  // namespace parbench
