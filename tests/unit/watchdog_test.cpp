// The watchdog's verdict from literal rank states, and the agreement check's message from
// literal option sets: the decisions the fault suite exercises end to end, here in
// microseconds and for cases a real run cannot stage reliably.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include "bench/watchdog.hpp"
#include "cli/rank_agreement.hpp"

namespace parbench {
namespace {

RankView busy(int rank, std::uint64_t progress, double age_s, const char* phase = "timed") {
    RankView view;
    view.rank = rank;
    view.host = "h" + std::to_string(rank);
    view.idle = false;
    view.progress = progress;
    view.age_s = age_s;
    view.activity = Activity{phase, "allreduce", 8, static_cast<int>(progress)};
    return view;
}

TEST(WatchdogVerdict, WaitsWhileAnyResponsiveRankProgressed) {
    EXPECT_FALSE(detail::diagnose_hang({busy(0, 5, 9.0), busy(1, 5, 1.0)}, 5.0));
    RankView fresh_idle;
    fresh_idle.rank = 1;
    fresh_idle.age_s = 0.5;
    EXPECT_FALSE(detail::diagnose_hang({busy(0, 5, 9.0), fresh_idle}, 5.0));
}

TEST(WatchdogVerdict, NamesTheSilentRankNotTheOneThatNoticed) {
    RankView stopped = busy(1, 5, 9.0);
    stopped.silent = true;
    stopped.silent_s = 6.0;
    const auto message = detail::diagnose_hang({busy(0, 5, 9.0), stopped, busy(2, 5, 9.0)}, 5.0);
    ASSERT_TRUE(message);
    const std::string verdict = message->substr(0, message->find(". Last reports"));
    EXPECT_NE(verdict.find("rank 1 (h1) stopped answering 6.0 s ago"), std::string::npos) << *message;
    EXPECT_EQ(verdict.find("rank 0"), std::string::npos) << *message;
    EXPECT_EQ(verdict.find("rank 2"), std::string::npos) << *message;
}

TEST(WatchdogVerdict, NamesTheRankThatIsBehind) {
    const auto message = detail::diagnose_hang({busy(0, 7, 9.0), busy(1, 6, 9.0, "warm-up"), busy(2, 7, 9.0)}, 5.0);
    ASSERT_TRUE(message);
    EXPECT_NE(message->find("rank 1 (h1) did not reach it"), std::string::npos) << *message;
    EXPECT_NE(message->find("allreduce (size 8 B, timed iteration 7)"), std::string::npos) << *message;
}

TEST(WatchdogVerdict, SaysSoWhenNoRankIsBehind) {
    const auto message = detail::diagnose_hang({busy(0, 7, 9.0), busy(1, 7, 9.0)}, 5.0);
    ASSERT_TRUE(message);
    EXPECT_NE(message->find("no rank is behind"), std::string::npos) << *message;
}

TEST(WatchdogVerdict, LeavesARankThatJustEndedToTheLauncher) {
    RankView gone = busy(1, 5, 9.0);
    gone.ended = true;
    gone.silent_s = 1.0;
    EXPECT_FALSE(detail::diagnose_hang({busy(0, 5, 9.0), gone}, 5.0));
    gone.silent_s = 30.0;
    const auto message = detail::diagnose_hang({busy(0, 5, 9.0), gone}, 5.0);
    ASSERT_TRUE(message);
    EXPECT_NE(message->find("rank 1 (h1) ended"), std::string::npos) << *message;
}

TEST(WatchdogVerdict, IdleRanksAloneNeverTimeOut) {
    RankView idle0, idle1;
    idle0.age_s = idle1.age_s = 100.0;
    idle1.rank = 1;
    EXPECT_FALSE(detail::diagnose_hang({idle0, idle1}, 5.0));
}

TEST(WatchdogVerdict, NamesTheCallEachRankWaitsIn) {
    RankView waiting = busy(0, 5, 9.0);
    waiting.activity = Activity{"timed", "train step", 0, 3};
    waiting.call = "waiting in pp recv from rank 1 (1.5 MiB, call 4 on pp in it)";
    RankView stopped = busy(1, 5, 9.0);
    stopped.activity = waiting.activity;
    stopped.call = "last call: tp allreduce (3.0 MiB, call 2 on tp in it), returned";
    stopped.silent = true;
    stopped.silent_s = 6.0;
    const auto message = detail::diagnose_hang({waiting, stopped}, 5.0);
    ASSERT_TRUE(message);
    EXPECT_NE(message->find("in train step (timed iteration 3), waiting in pp recv from rank 1 (1.5 MiB"),
              std::string::npos)
        << *message;
    EXPECT_NE(message->find("rank 1 (h1) stopped answering"), std::string::npos) << *message;
    EXPECT_NE(message->find("rank 1 (h1) in train step (timed iteration 3), last call: tp allreduce"), std::string::npos)
        << *message;
}

TEST(WatchdogCalls, DescribesTheCallByDimensionSizeAndWorldRank) {
    const std::vector<int> pp_world_ranks{1, 3};
    EXPECT_EQ(detail::describe_call("pp", pp_world_ranks, {"recv", 1572864, -1, 1, true}, 4, true),
              "waiting on a non-blocking pp recv from rank 3 (1.5 MiB, call 4 on pp in it)");
    EXPECT_EQ(detail::describe_call("tp", {0, 1}, {"allreduce", 3145728, -1, -1, false}, 2, false),
              "last call: tp allreduce (3.0 MiB, call 2 on tp in it), returned");
    EXPECT_EQ(detail::describe_call("world", {0, 1, 2}, {"sendrecv", 8, 2, 0, false}, 1, true),
              "waiting in world sendrecv to rank 2, from rank 0 (8 B, call 1 on world in it)");
    EXPECT_EQ(detail::describe_call("world", {0, 1}, {"barrier", 0, -1, -1, false}, 9, true),
              "waiting in world barrier (call 9 on world in it)");
}

// What a watchdog of one rank (no MPI) says when it times out, waited for up to 30 s.
class TimeoutMessage {
  public:
    std::function<void(const std::string&)> sink() {
        return [this](const std::string& text) {
            std::lock_guard lock(mutex_);
            message_ = text;
            done_.notify_all();
        };
    }
    std::string wait() {
        std::unique_lock lock(mutex_);
        done_.wait_for(lock, std::chrono::seconds(30), [&] { return !message_.empty(); });
        return message_;
    }
    bool fired() {
        std::lock_guard lock(mutex_);
        return !message_.empty();
    }

  private:
    std::mutex mutex_;
    std::condition_variable done_;
    std::string message_;
};

// The whole path without MPI: a watchdog of one rank hears of a call and names it when the
// activity outlasts the timeout.
std::string message_after_call(bool still_inside) {
    TimeoutMessage timeout;
    Watchdog watchdog(0.2, 0, timeout.sink());
    const int pp = watchdog.add_channel("pp", {0, 5});
    const int dp = watchdog.add_channel("dp", {0, 2});
    watchdog.enter({"timed", "train step", 0, 2});
    watchdog.call_started(dp, {"reducescatter", 2048, -1, -1, false});
    watchdog.call_ended(dp);
    watchdog.call_started(pp, {"send", 4096, 1, -1, false});
    watchdog.call_ended(pp);
    watchdog.call_started(pp, {"recv", 4096, -1, 1, true});
    if (!still_inside) watchdog.call_ended(pp);
    return timeout.wait();
}

TEST(WatchdogCalls, ReportsTheCallTheRankIsIn) {
    const std::string message = message_after_call(true);
    EXPECT_NE(message.find("train step (timed iteration 2), waiting on a non-blocking pp recv from rank 5 (4.0 KiB, "
                           "call 2 on pp in it)"),
              std::string::npos)
        << message;
}

TEST(WatchdogCalls, ReportsTheLastCallOnceItReturned) {
    const std::string message = message_after_call(false);
    EXPECT_NE(message.find("last call: pp recv from rank 5 (4.0 KiB, call 2 on pp in it), returned"), std::string::npos)
        << message;
}

TEST(WatchdogCalls, ANewActivityForgetsTheCallsOfTheLast) {
    TimeoutMessage timeout;
    Watchdog watchdog(0.2, 0, timeout.sink());
    const int tp = watchdog.add_channel("tp", {0, 1});
    watchdog.enter({"timed", "train step", 0, 1});
    watchdog.call_started(tp, {"allreduce", 64, -1, -1, false});
    watchdog.call_ended(tp);
    watchdog.enter({"timed", "train step", 0, 2});
    const std::string message = timeout.wait();
    EXPECT_NE(message.find("train step (timed iteration 2): a rank is stuck"), std::string::npos) << message;
    EXPECT_EQ(message.find("allreduce"), std::string::npos) << message;
}

TEST(WatchdogCalls, AnAdvanceNamesTheIterationAndForgetsItsCalls) {
    TimeoutMessage timeout;
    Watchdog watchdog(0.2, 0, timeout.sink());
    const int world = watchdog.add_channel("world", {0, 1});
    watchdog.enter({"timed", "allreduce", 8, 0});
    watchdog.call_started(world, {"barrier", 0, -1, -1, false});
    watchdog.call_ended(world);
    watchdog.advance(1);
    watchdog.call_started(world, {"barrier", 0, -1, -1, false});
    watchdog.call_ended(world);
    watchdog.advance(2);
    const std::string message = timeout.wait();
    EXPECT_NE(message.find("allreduce (size 8 B, timed iteration 2): a rank is stuck"), std::string::npos) << message;
    EXPECT_EQ(message.find("barrier"), std::string::npos) << message;
}

TEST(WatchdogCalls, AdvancingKeepsTheWatchdogQuiet) {
    TimeoutMessage timeout;
    Watchdog watchdog(1.0, 0, timeout.sink());
    watchdog.enter({"timed", "allreduce", 8, 0});
    // 1.5 s of iterations, each far shorter than the timeout: the age counts from the last.
    for (int i = 1; i <= 30; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        watchdog.advance(i);
    }
    watchdog.idle();
    EXPECT_FALSE(timeout.fired());
}

using Options = std::vector<std::pair<std::string, std::string>>;

TEST(RankAgreement, NamesTheFirstDifferingOptionWithEveryRanksValue) {
    const Options a{{"dtype", "float32"}, {"iters", "20"}};
    const Options b{{"dtype", "float64"}, {"iters", "20"}};
    EXPECT_EQ(detail::disagreement({a, b, a}),
              "ranks disagree on --dtype: ranks 0,2 float32, rank 1 float64; launch every rank with the same flags");
    EXPECT_FALSE(detail::disagreement({a, a}));
}

TEST(RankAgreement, ComparesLabelledValuesWithoutTheirLabels) {
    const Options a{{"model_content", labelled_value("digest 1", "/a/gpt.json")}};
    const Options b{{"model_content", labelled_value("digest 1", "/b/gpt.json")}};
    const Options c{{"model_content", labelled_value("digest 2", "/c/gpt.json")}};
    EXPECT_FALSE(detail::disagreement({a, b}));
    EXPECT_EQ(detail::disagreement({a, c}),
              "ranks disagree on the --model config's content: rank 0 /a/gpt.json (digest 1), rank 1 /c/gpt.json "
              "(digest 2); launch every rank with the same flags");
}

TEST(RankAgreement, FlattensNestedOptionsAndNamesFlags) {
    const auto flat = detail::flatten_options({{"global_batch", 8}, {"resolved", {{"tp", 2}}}, {"sizes", {1, 2}}});
    EXPECT_EQ(flat, (Options{{"global_batch", "8"}, {"resolved.tp", "2"}, {"sizes", "[1,2]"}}));
    EXPECT_EQ(detail::flag_of_config_key("global_batch"), "--global-batch");
    EXPECT_EQ(detail::flag_of_config_key("resolved.tp"), "--tp");
    const Options missing{{"global_batch", "8"}};
    EXPECT_NE(detail::disagreement({flat, missing})->find("(not set)"), std::string::npos);
}

// Issue 22: keys whose last part is not a flag were named --requested (for --mpi-threads) and
// --bytes (pairs' --size); with the command's flags at hand no name is ever guessed.
TEST(RankAgreement, NamesOnlyFlagsTheCommandHas) {
    const FlagLookup collective_flags = [](const std::string& flag) {
        return flag == "--mpi-threads" || flag == "--dtype" || flag == "--aggregate";
    };
    EXPECT_EQ(detail::flag_of_config_key("mpi_threads.requested", collective_flags), "--mpi-threads");
    EXPECT_EQ(detail::flag_of_config_key("mpi_threads.requested"), "--mpi-threads");
    EXPECT_EQ(detail::flag_of_config_key("bytes"), "--size");
    EXPECT_EQ(detail::flag_of_config_key("aggregation", collective_flags), "--aggregate");
    EXPECT_EQ(detail::flag_of_config_key("dtype", collective_flags), "--dtype");
    EXPECT_EQ(detail::flag_of_config_key("buffer_offsets.send", collective_flags), "the option 'buffer_offsets.send'");
    const Options a{{"mpi_threads.requested", "single"}};
    const Options b{{"mpi_threads.requested", "funneled"}};
    EXPECT_EQ(detail::disagreement({a, b}, collective_flags),
              "ranks disagree on --mpi-threads: rank 0 single, rank 1 funneled; launch every rank with the same flags");
}

// Issue 32: floating-point options agree only when their bits do; JSON's text wrote NaN and
// both infinities alike as null, and a rounded text would let close values pass.
TEST(RankAgreement, ComparesFloatingPointValuesExactly) {
    const auto one = detail::flatten_options({{"lr", 1.0}});
    const auto close = detail::flatten_options({{"lr", 1.0000000000000002}});
    EXPECT_EQ(detail::disagreement({one, close}),
              "ranks disagree on --lr: rank 0 1, rank 1 1.0000000000000002; launch every rank with the same flags");
    const double infinity = std::numeric_limits<double>::infinity();
    EXPECT_TRUE(detail::disagreement(
        {detail::flatten_options({{"x", infinity}}), detail::flatten_options({{"x", -infinity}})}));
    EXPECT_TRUE(detail::disagreement({detail::flatten_options({{"x", 0.0}}), detail::flatten_options({{"x", -0.0}})}));
    EXPECT_TRUE(detail::disagreement({detail::flatten_options({{"x", std::numeric_limits<double>::quiet_NaN()}}),
                                      detail::flatten_options({{"x", nullptr}})}));
    EXPECT_FALSE(detail::disagreement({one, detail::flatten_options({{"lr", 1.0}})}));
}

// What a rank runs, as the first agreement compares it: the command and the flags that make a
// rank run something else (no MPI, or none of the command's calls).
TEST(RankAgreement, SaysWhatARankRuns) {
    EXPECT_EQ(what_rank_runs({"parbench", "allreduce", "--size", "1K"}), "allreduce");
    EXPECT_EQ(what_rank_runs({"parbench", "train", "--print-schedule", "--pp", "2"}), "train --print-schedule");
    EXPECT_EQ(what_rank_runs({"parbench", "--version"}), "--version");
    EXPECT_EQ(what_rank_runs({"parbench", "allreduce", "-h"}), "allreduce --help");
    EXPECT_EQ(what_rank_runs({"parbench", "--dry-run", "allreduce", "--size", "1K"}), "allreduce --dry-run");
    EXPECT_EQ(what_rank_runs({"parbench", "plan", "--model", "gpt-tiny"}), "plan");
    EXPECT_EQ(what_rank_runs({"parbench"}), "(no command)");
}

TEST(RankAgreement, NamesEachRanksBuildBeforeItsCommand) {
    EXPECT_FALSE(detail::job_disagreement({"allreduce", "allreduce"}, {"0.1.0 (abc)", "0.1.0 (abc)"}));
    EXPECT_EQ(detail::job_disagreement({"allreduce", "info", "info"}, {"0.1.0 (abc)", "0.1.0 (abc)", "0.1.0 (abc)"}),
              "ranks run different commands: rank 0 allreduce, ranks 1,2 info; launch every rank with the same "
              "command and flags");
    EXPECT_EQ(detail::job_disagreement({"allreduce", "info"}, {"0.1.0 (abc)", "0.1.0 (def-dirty)"}),
              "ranks run different parbench builds: rank 0 0.1.0 (abc), rank 1 0.1.0 (def-dirty); install one build "
              "on every host ('parbench --version' prints it)");
}

// Progress lines: from the watchdog's thread, once a point has run the interval, naming the
// point and the iteration; a new point starts the count again; no timeout needed.
TEST(WatchdogProgress, SaysWhichPointAndIterationALongPointIsIn) {
    std::mutex mutex;
    std::vector<std::string> lines;
    ProgressLines progress{0.3, [&](const std::string& line) {
                               std::lock_guard lock(mutex);
                               lines.push_back(line);
                           }};
    Watchdog watchdog(0.0, 0, [](const std::string&) { FAIL() << "no timeout was asked for"; }, nullptr, {},
                      progress);
    EXPECT_TRUE(watchdog.watching());
    EXPECT_FALSE(watchdog.enabled());
    watchdog.enter({"timed", "allreduce", 1024, 0});
    for (int i = 1; i <= 25; ++i) {  // 2.5 s of 0.1 s iterations
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        watchdog.advance(i);
    }
    watchdog.idle();
    std::lock_guard lock(mutex);
    ASSERT_GE(lines.size(), 1u);
    for (const std::string& line : lines)
        EXPECT_EQ(line.rfind("progress: allreduce (size 1024 B, timed iteration ", 0), 0u) << line;
    EXPECT_NE(lines.back().find("; this point has run "), std::string::npos) << lines.back();
}

TEST(WatchdogProgress, ShortPointsPrintNothing) {
    std::mutex mutex;
    std::vector<std::string> lines;
    Watchdog watchdog(0.0, 0, [](const std::string&) {}, nullptr, {}, ProgressLines{2.0, [&](const std::string& line) {
                                                                          std::lock_guard lock(mutex);
                                                                          lines.push_back(line);
                                                                      }});
    for (int point = 0; point < 3; ++point) {  // three points of 1.2 s each: none reaches 2 s
        watchdog.enter({"warm-up", "allreduce", static_cast<std::uint64_t>(8 << point), 0});
        std::this_thread::sleep_for(std::chrono::milliseconds(600));
        watchdog.enter({"timed", "allreduce", static_cast<std::uint64_t>(8 << point), 0});
        std::this_thread::sleep_for(std::chrono::milliseconds(600));
        watchdog.idle();
    }
    std::lock_guard lock(mutex);
    EXPECT_TRUE(lines.empty()) << lines.front();
}

}  // namespace
}  // namespace parbench
