#include "cli/rank_agreement.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <vector>

#include "core/error.hpp"
#include "core/exact_number.hpp"
#include "core/json_file.hpp"
#include "core/version.hpp"

namespace parbench {
namespace {
constexpr char label_separator = '\x1d';
}  // namespace

std::string labelled_value(const std::string& compared, const std::string& label) {
    return compared + label_separator + label;
}

namespace detail {

std::uint64_t fnv1a(const std::string& text) {
    std::uint64_t hash = 14695981039346656037ull;
    for (unsigned char c : text) {
        hash ^= c;
        hash *= 1099511628211ull;
    }
    return hash;
}

namespace {

void flatten_into(const nlohmann::json& value, const std::string& prefix,
                  std::vector<std::pair<std::string, std::string>>& out) {
    if (value.is_object() && !value.empty()) {
        for (const auto& [key, item] : value.items()) flatten_into(item, prefix.empty() ? key : prefix + "." + key, out);
        return;
    }
    // Floating-point values exactly (JSON's text would write NaN and infinities alike as null).
    out.emplace_back(prefix, value.is_string()         ? value.get<std::string>()
                             : value.is_number_float() ? exact_number_text(value.get<double>())
                                                       : value.dump());
}

std::string shortened(const std::string& value) {
    constexpr std::size_t longest = 60;
    return value.size() <= longest ? value : value.substr(0, longest - 3) + "...";
}

std::string rank_list(const std::vector<int>& ranks) {
    std::string text = ranks.size() == 1 ? "rank " : "ranks ";
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (i == 4 && ranks.size() > 5) {
            text += " and ";
            text += std::to_string(ranks.size() - 4);
            text += " more";
            return text;
        }
        if (i > 0) text += ',';
        text += std::to_string(ranks[i]);
    }
    return text;
}

// Every rank's text, padded to the longest, gathered to every rank.
std::vector<std::string> allgather_texts(Communicator& control, std::string text) {
    std::uint64_t length = text.size();
    std::uint64_t longest = 0;
    control.allreduce(&length, &longest, 1, DType::uint64, ReduceOp::max);
    text.resize(static_cast<std::size_t>(longest), '\0');
    std::string all(static_cast<std::size_t>(longest) * static_cast<std::size_t>(control.size()), '\0');
    control.allgather(text.data(), all.data(), static_cast<std::size_t>(longest), DType::uint8);
    std::vector<std::string> texts;
    for (int r = 0; r < control.size(); ++r) {
        std::string mine = all.substr(static_cast<std::size_t>(r) * longest, static_cast<std::size_t>(longest));
        mine.resize(std::min(mine.size(), mine.find('\0')));
        texts.push_back(std::move(mine));
    }
    return texts;
}

}  // namespace

std::string values_by_rank(const std::vector<std::string>& values) {
    std::vector<std::pair<std::string, std::vector<int>>> groups;  // value -> ranks, in rank order
    for (std::size_t r = 0; r < values.size(); ++r) {
        auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == values[r]; });
        if (group == groups.end()) groups.push_back({values[r], {static_cast<int>(r)}});
        else group->second.push_back(static_cast<int>(r));
    }
    std::string text;
    for (std::size_t g = 0; g < groups.size(); ++g)
        text += (g ? ", " : "") + rank_list(groups[g].second) + " " + shortened(groups[g].first);
    return text;
}

std::optional<std::string> job_disagreement(const std::vector<std::string>& commands,
                                            const std::vector<std::string>& builds) {
    const auto differ = [](const std::vector<std::string>& values) {
        return std::any_of(values.begin(), values.end(), [&](const std::string& v) { return v != values.front(); });
    };
    if (differ(builds))
        return "ranks run different parbench builds: " + values_by_rank(builds) +
               "; install one build on every host ('parbench --version' prints it)";
    if (differ(commands))
        return "ranks run different commands: " + values_by_rank(commands) +
               "; launch every rank with the same command and flags";
    return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> flatten_options(const nlohmann::json& options) {
    std::vector<std::pair<std::string, std::string>> out;
    flatten_into(options, "", out);
    return out;
}

std::string flag_of_config_key(const std::string& key, const FlagLookup& is_flag) {
    // Keys whose flag another name: the report's config names what was resolved, the flag what
    // the user typed.
    static const std::map<std::string, std::string> named = {
        {"collectives", "the collective (the command)"},
        {"sizes", "the sizes (--size, -b, -e, -f)"},
        {"timeout_s", "--timeout"},
        {"backend_requested", "--backend"},
        {"batch_size", "--batch-size"},
        {"check_runs", "-c/--check"},
        {"model_content", "the --model config's content"},
        {"resolved.dp", "--dp"},
        {"resolved.tp", "--tp"},
        {"resolved.pp", "--pp"},
        {"resolved.seq_len", "--seq"},
        {"log_interval", "--log-interval"},
        {"mpi_threads.requested", "--mpi-threads"},
        {"aggregation", "--aggregate"},
        {"reported_statistic", "--aggregate"},
        {"min_busbw", "--min-busbw (or NCCL_TESTS_MIN_BW)"},
        {"bytes", "--size"},                  // pairs
        {"latency_bytes", "--latency-size"},  // pairs
    };
    if (const auto found = named.find(key); found != named.end()) return found->second;
    const auto dashed = [](std::string name) {
        std::replace(name.begin(), name.end(), '_', '-');
        std::replace(name.begin(), name.end(), '.', '-');
        return "--" + name;
    };
    const std::size_t first_dot = key.find('.');
    const std::size_t last_dot = key.rfind('.');
    const std::string last = dashed(last_dot == std::string::npos ? key : key.substr(last_dot + 1));
    if (!is_flag) return last;
    // The last part ("--dtype"), the first ("mpi_threads.requested": "--mpi-threads"), the whole.
    for (const std::string& candidate : {last, dashed(key.substr(0, first_dot)), dashed(key)})
        if (is_flag(candidate)) return candidate;
    return "the option '" + key + "'";
}

std::optional<std::string> disagreement(const std::vector<std::vector<std::pair<std::string, std::string>>>& by_rank,
                                        const FlagLookup& is_flag) {
    // Every key any rank has, in the order the first rank that has it lists it.
    std::vector<std::string> keys;
    for (const auto& options : by_rank)
        for (const auto& [key, value] : options)
            if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    for (const std::string& key : keys) {
        std::vector<std::pair<std::string, std::vector<int>>> groups;  // value -> ranks, in rank order
        for (std::size_t r = 0; r < by_rank.size(); ++r) {
            const auto& options = by_rank[r];
            const auto found = std::find_if(options.begin(), options.end(), [&](const auto& kv) { return kv.first == key; });
            const std::string value = found == options.end() ? "(not set)" : found->second;
            const std::string compared = value.substr(0, value.find(label_separator));
            auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
                return g.first.substr(0, g.first.find(label_separator)) == compared;
            });
            if (group == groups.end()) groups.push_back({value, {static_cast<int>(r)}});
            else group->second.push_back(static_cast<int>(r));
        }
        if (groups.size() < 2) continue;
        std::string text = "ranks disagree on " + flag_of_config_key(key, is_flag) + ": ";
        for (std::size_t g = 0; g < groups.size(); ++g) {
            const std::string& value = groups[g].first;
            const std::size_t cut = value.find(label_separator);
            const std::string shown =
                cut == std::string::npos ? shortened(value) : value.substr(cut + 1) + " (" + value.substr(0, cut) + ")";
            text += (g ? ", " : "") + rank_list(groups[g].second) + " " + shown;
        }
        return text + "; launch every rank with the same flags";
    }
    return std::nullopt;
}

}  // namespace detail

std::optional<std::string> agree_on_error(Communicator& control, const std::vector<std::string>& hosts,
                                          const std::optional<std::string>& local_error) {
    const int failed = local_error ? 1 : 0;
    std::vector<int> failed_by_rank(static_cast<std::size_t>(control.size()));
    control.allgather(&failed, failed_by_rank.data(), 1, DType::int32);
    const auto first = std::find(failed_by_rank.begin(), failed_by_rank.end(), 1);
    if (first == failed_by_rank.end()) return std::nullopt;
    const int first_rank = static_cast<int>(first - failed_by_rank.begin());
    const auto failures = std::count(failed_by_rank.begin(), failed_by_rank.end(), 1);

    std::int64_t length = local_error ? static_cast<std::int64_t>(local_error->size()) : 0;
    control.broadcast(&length, &length, 1, DType::int64, first_rank);
    std::string message = local_error.value_or(std::string());
    message.resize(static_cast<std::size_t>(length));
    control.broadcast(message.data(), message.data(), static_cast<std::size_t>(length), DType::uint8, first_rank);
    if (failures == control.size()) return message;
    std::string where = "rank " + std::to_string(first_rank);
    if (static_cast<std::size_t>(first_rank) < hosts.size()) where += " (" + hosts[static_cast<std::size_t>(first_rank)] + ")";
    if (failures > 1) where += " and " + std::to_string(failures - 1) + " other rank(s)";
    return where + ": " + message;
}

void throw_if_any_rank_failed(Communicator& control, const std::optional<std::string>& local_error,
                              const std::vector<std::string>& hosts) {
    if (auto message = agree_on_error(control, hosts, local_error)) throw UsageError(*message);
}

void check_outputs_writable(Communicator& control, std::initializer_list<OutputFile> outputs) {
    std::optional<std::string> error;
    if (control.rank() == 0) {
        try {
            for (const OutputFile& output : outputs)
                if (!output.path.empty()) check_writable(output.path, output.flag);
        } catch (const UsageError& failure) {
            error = failure.what();
        }
    }
    // Only the first rank looked, so the message is its own: no rank prefix.
    const int mine = error ? 1 : 0;
    int any = 0;
    control.allreduce(&mine, &any, 1, DType::int32, ReduceOp::max);
    if (any == 0) return;
    std::int64_t length = error ? static_cast<std::int64_t>(error->size()) : 0;
    control.broadcast(&length, &length, 1, DType::int64, 0);
    std::string message = error.value_or(std::string());
    message.resize(static_cast<std::size_t>(length));
    control.broadcast(message.data(), message.data(), static_cast<std::size_t>(length), DType::uint8, 0);
    throw UsageError(message);
}

std::string what_rank_runs(const std::vector<std::string>& arguments) {
    // The flags that end a run before its command starts MPI, under the name --help lists them.
    static const std::vector<std::pair<std::string, std::string>> early_exits = {
        {"--dry-run", "--dry-run"}, {"--help", "--help"}, {"-h", "--help"},
        {"--print-schedule", "--print-schedule"}, {"--version", "--version"}};
    std::string command;
    std::vector<std::string> flags;
    for (std::size_t i = 1; i < arguments.size(); ++i) {
        const std::string& argument = arguments[i];
        if (command.empty() && !argument.starts_with('-')) command = argument;
        for (const auto& [given, named] : early_exits)
            if (argument == given && std::find(flags.begin(), flags.end(), named) == flags.end()) flags.push_back(named);
    }
    std::sort(flags.begin(), flags.end());
    std::string words = command;
    for (const std::string& flag : flags) words += (words.empty() ? "" : " ") + flag;
    return words.empty() ? "(no command)" : words;
}

void require_same_job(Communicator& control, const std::string& command) {
    const std::string build = std::string(tool_version) + " (" + git_revision() + ")";
    const std::uint64_t digest = detail::fnv1a(command + '\x1f' + build);
    std::vector<std::uint64_t> digests(static_cast<std::size_t>(control.size()));
    control.allgather(&digest, digests.data(), 1, DType::uint64);
    if (std::all_of(digests.begin(), digests.end(), [&](std::uint64_t d) { return d == digests.front(); })) return;
    const auto commands = detail::allgather_texts(control, command);
    const auto builds = detail::allgather_texts(control, build);
    if (auto message = detail::job_disagreement(commands, builds)) throw UsageError(*message);
    throw std::logic_error("ranks disagree on their command or build (digests differ); launch every rank alike");
}

void require_same_options(Communicator& control, const nlohmann::json& options, const FlagLookup& is_flag) {
    const auto flat = detail::flatten_options(options);
    std::string serial;
    std::string compared;  // what the digest covers: values without their labels
    for (const auto& [key, value] : flat) {
        serial += key + '\x1f' + value + '\x1e';
        compared += key + '\x1f' + value.substr(0, value.find(label_separator)) + '\x1e';
    }
    const std::uint64_t digest = detail::fnv1a(compared);
    std::vector<std::uint64_t> digests(static_cast<std::size_t>(control.size()));
    control.allgather(&digest, digests.data(), 1, DType::uint64);
    if (std::all_of(digests.begin(), digests.end(), [&](std::uint64_t d) { return d == digests.front(); })) return;

    // They differ: every rank gets every rank's options (padded to the longest) to name the option.
    std::uint64_t length = serial.size();
    std::uint64_t longest = 0;
    control.allreduce(&length, &longest, 1, DType::uint64, ReduceOp::max);
    serial.resize(static_cast<std::size_t>(longest), '\0');
    std::string all(static_cast<std::size_t>(longest) * static_cast<std::size_t>(control.size()), '\0');
    control.allgather(serial.data(), all.data(), static_cast<std::size_t>(longest), DType::uint8);
    std::vector<std::vector<std::pair<std::string, std::string>>> by_rank(static_cast<std::size_t>(control.size()));
    for (int r = 0; r < control.size(); ++r) {
        const std::string text = all.substr(static_cast<std::size_t>(r) * longest, static_cast<std::size_t>(longest));
        std::size_t at = 0;
        while (at < text.size() && text[at] != '\0') {
            const std::size_t unit = text.find('\x1f', at);
            const std::size_t end = text.find('\x1e', unit);
            if (unit == std::string::npos || end == std::string::npos) break;
            by_rank[static_cast<std::size_t>(r)].emplace_back(text.substr(at, unit - at), text.substr(unit + 1, end - unit - 1));
            at = end + 1;
        }
    }
    if (auto message = detail::disagreement(by_rank, is_flag)) throw UsageError(*message);
    // Equal texts hash alike, so some value differs; this is only reached if parsing lost it.
    throw std::logic_error("ranks disagree on their options (digests differ); launch every rank with the same flags");
}

}  // namespace parbench
