// nccl-tests' flags as a job script gives them: each turned into parbench's option, or refused
// in one line that names the nccl-tests flag.
#include "cli/nccl_tests_flags.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"

namespace parbench {
namespace {

NcclTestsMeaning meaning_of(std::vector<std::string> arguments) {
    CLI::App app;
    NcclTestsFlags flags;
    add_nccl_tests_flags(app, flags);
    std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());  // CLI11 takes them last first
    app.parse(reversed);
    return nccl_tests_meaning(flags);
}

std::string refusal_of(std::vector<std::string> arguments) {
    try {
        meaning_of(std::move(arguments));
    } catch (const UsageError& error) {
        return error.what();
    }
    return "";
}

TEST(NcclTestsFlags, ShortAndLongFormsMeanTheSame) {
    for (const auto& arguments : {std::vector<std::string>{"-m", "4", "-a", "3", "-J", "out.json", "-I", "1", "-u", "2"},
                                  std::vector<std::string>{"--agg_iters", "4", "--average=3", "--output_file", "out.json",
                                                           "--per_iter_timing", "1", "--unalign", "2"}}) {
        const NcclTestsMeaning meaning = meaning_of(arguments);
        EXPECT_EQ(meaning.batch_size, 4);
        EXPECT_EQ(meaning.timing, "batched");
        EXPECT_EQ(meaning.aggregate, "rank-max");
        EXPECT_EQ(meaning.json_path, "out.json");
        EXPECT_TRUE(meaning.full_statistics);
        EXPECT_EQ(meaning.unalign_elements, 2u);
        EXPECT_EQ(meaning.translations.size(), 5u);
    }
}

TEST(NcclTestsFlags, DefaultsChangeNothing) {
    // What cluster scripts spell out: one thread, one GPU, no graph, no register, non-blocking.
    const NcclTestsMeaning meaning =
        meaning_of({"-t", "1", "-g", "1", "-G", "0", "-R", "0", "-z", "0", "-m", "1", "-N", "1", "-M", "0", "-p", "1"});
    EXPECT_FALSE(meaning.timing);
    EXPECT_FALSE(meaning.batch_size);
    EXPECT_FALSE(meaning.repeat);
    EXPECT_FALSE(meaning.graph);
    EXPECT_TRUE(meaning.translations.empty());
}

TEST(NcclTestsFlags, AveragesAreTheAggregations) {
    EXPECT_EQ(meaning_of({"-a", "0"}).aggregate, "rank0");
    EXPECT_EQ(meaning_of({"-a", "1"}).aggregate, "rank-mean");
    EXPECT_EQ(meaning_of({"-a", "2"}).aggregate, "rank-min");
    EXPECT_EQ(meaning_of({"-a", "3"}).aggregate, "rank-max");
}

TEST(NcclTestsFlags, BlockingMapsToPerIterationOrBatchedTiming) {
    EXPECT_EQ(meaning_of({"-z", "1"}).timing, "per-iter");
    EXPECT_EQ(meaning_of({"-z", "3"}).timing, "per-iter");
    EXPECT_EQ(meaning_of({"-z", "3", "-m", "8"}).timing, "batched");  // a barrier and a sync per 8 ops
    EXPECT_NE(refusal_of({"-z", "1", "-m", "8"}).find("-z 1"), std::string::npos);
    EXPECT_NE(refusal_of({"-z", "2"}).find("-z (--blocking) 2"), std::string::npos);
}

TEST(NcclTestsFlags, RepeatAndGraphAreTaken) {
    EXPECT_EQ(meaning_of({"-N", "0"}).repeat, 0);
    EXPECT_EQ(meaning_of({"--run_cycles", "3"}).repeat, 3);
    EXPECT_TRUE(meaning_of({"-G", "10"}).graph);
}

TEST(NcclTestsFlags, RefusalsNameTheFlagAndWhatToUse) {
    const std::string gpus = refusal_of({"-g", "8"});
    EXPECT_NE(gpus.find("-g (--ngpus) 8"), std::string::npos) << gpus;
    EXPECT_NE(gpus.find("one rank per GPU"), std::string::npos) << gpus;
    EXPECT_NE(refusal_of({"-t", "4"}).find("-t (--nthreads) 4"), std::string::npos);
    EXPECT_NE(refusal_of({"-R", "2"}).find("drop -R"), std::string::npos);
    EXPECT_NE(refusal_of({"-C", "1"}).find("drop -C"), std::string::npos);
    EXPECT_NE(refusal_of({"-S", "1"}).find("drop -S"), std::string::npos);
    EXPECT_NE(refusal_of({"-y", "1"}).find("drop -y"), std::string::npos);
    EXPECT_NE(refusal_of({"-D", "1"}).find("drop -D"), std::string::npos);
    EXPECT_NE(refusal_of({"-x", "0"}).find("drop -x"), std::string::npos);
    EXPECT_NE(refusal_of({"-V", "16"}).find("drop -V"), std::string::npos);
    EXPECT_NE(refusal_of({"-K", "2"}).find("-w/--warmup"), std::string::npos);
    EXPECT_NE(refusal_of({"-a", "4"}).find("-a (--average) 4"), std::string::npos);
    EXPECT_NE(refusal_of({"-m", "x"}).find("-m (--agg_iters) 'x'"), std::string::npos);
}

TEST(NcclTestsFlags, CheckCountsAreCheckedRuns) {
    EXPECT_EQ(check_runs_of(""), 1);  // parbench's -c/--check without a value
    EXPECT_EQ(check_runs_of("0"), 0);
    EXPECT_EQ(check_runs_of("1"), 1);
    EXPECT_EQ(check_runs_of("5"), 5);
    EXPECT_THROW(check_runs_of("yes"), UsageError);
    EXPECT_THROW(check_runs_of("-1"), UsageError);
}

TEST(NcclTestsFlags, TypeNamesOfNcclTestsAreParbenchs) {
    EXPECT_EQ(parbench_dtype_name("half"), "float16");
    EXPECT_EQ(parbench_dtype_name("float"), "float32");
    EXPECT_EQ(parbench_dtype_name("double"), "float64");
    EXPECT_EQ(parbench_dtype_name("bfloat16"), "bfloat16");
    EXPECT_EQ(parbench_dtype_name("int8"), "int8");
    EXPECT_THROW(parbench_dtype_name("f8e4m3"), UsageError);
}

}  // namespace
}  // namespace parbench
