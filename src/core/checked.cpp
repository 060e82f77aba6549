#include "core/checked.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.hpp"

namespace parbench {
namespace {

std::string with_hint(std::string message, std::string_view hint) {
    if (!hint.empty()) message += "; " + std::string(hint);
    return message;
}

// Shortest text that reads back as the same double ("0.5", "1e+12", "nan").
std::string number_text(double value) {
    std::ostringstream text;
    text.precision(17);
    text << value;
    return text.str();
}

std::string range_text(double min, double max, bool min_exclusive) {
    std::ostringstream text;
    text << (min_exclusive ? "above " : "from ") << number_text(min) << (min_exclusive ? " and at most " : " to ")
         << number_text(max);
    return text.str();
}

}  // namespace

std::int64_t check_int(std::int64_t value, std::string_view name, std::int64_t min, std::int64_t max,
                       std::string_view hint) {
    if (value < min || value > max)
        throw UsageError(with_hint(std::string(name) + " " + std::to_string(value) + ": must be an integer from " +
                                       std::to_string(min) + " to " + std::to_string(max),
                                   hint));
    return value;
}

double check_number(double value, std::string_view name, double min, double max, bool min_exclusive,
                    std::string_view hint) {
    const bool above_min = min_exclusive ? value > min : value >= min;
    if (!std::isfinite(value) || !above_min || value > max)
        throw UsageError(with_hint(std::string(name) + " " + number_text(value) + ": must be a finite number " +
                                       range_text(min, max, min_exclusive),
                                   hint));
    return value;
}

double parse_finite(std::string_view text, std::string_view name) {
    const std::string copy(text);
    const auto refuse = [&] {
        return UsageError(std::string(name) + " '" + copy + "': not a finite number; write one such as 1, 0.5 or 2e3");
    };
    // strtod takes leading blanks, "nan", "inf" and hexadecimal: only plain decimals are numbers here.
    if (copy.empty() || copy.find_first_not_of("0123456789.eE+-") != std::string::npos) throw refuse();
    char* end = nullptr;
    errno = 0;
    const double value = std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size() || errno == ERANGE || !std::isfinite(value)) throw refuse();
    return value;
}

std::uint64_t checked_product(std::initializer_list<std::uint64_t> factors, std::string_view what, std::uint64_t limit,
                              std::string_view hint) {
    std::uint64_t product = 1;
    bool over = false;
    for (const std::uint64_t factor : factors) {
        if (factor == 0) return 0;
        if (!over && product > limit / factor) over = true;
        if (!over) product *= factor;
    }
    if (over || product > limit) {
        std::string shown;
        for (const std::uint64_t factor : factors) shown += (shown.empty() ? "" : " x ") + std::to_string(factor);
        throw UsageError(with_hint(std::string(what) + " = " + shown + " exceeds " + std::to_string(limit), hint));
    }
    return product;
}

JsonFields::JsonFields(const nlohmann::json& object, std::string source, std::string path)
    : object_(object), source_(std::move(source)), path_(std::move(path)) {
    if (!object_.is_object())
        throw UsageError(path_.empty() ? source_ + ": expected a JSON object, got " + std::string(object_.type_name())
                                       : name(std::string()) + " must be a JSON object, got " + object_.type_name());
}

std::string JsonFields::name(const std::string& key) const {
    std::string full = path_;
    if (!key.empty()) full += (full.empty() ? "" : ".") + key;
    return source_ + ": \"" + full + "\"";
}

bool JsonFields::has(const std::string& key) const { return object_.contains(key); }

const nlohmann::json& JsonFields::value(const std::string& key) const {
    const auto found = object_.find(key);
    if (found == object_.end()) throw UsageError(name(key) + " is missing");
    return *found;
}

std::int64_t JsonFields::integer(const std::string& key, std::int64_t min, std::int64_t max) const {
    const nlohmann::json& v = value(key);
    // Every JSON number through a double: the ranges here lie within 2^53, where doubles are exact.
    const bool integral = v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>());
    if (!integral || v.get<double>() < static_cast<double>(min) || v.get<double>() > static_cast<double>(max))
        throw UsageError(name(key) + " must be an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                         ", got " + v.dump());
    return static_cast<std::int64_t>(v.get<double>());
}

std::optional<std::int64_t> JsonFields::optional_integer(const std::string& key, std::int64_t min,
                                                         std::int64_t max) const {
    if (!has(key)) return std::nullopt;
    return integer(key, min, max);
}

double JsonFields::number(const std::string& key, double min, double max, bool min_exclusive) const {
    const nlohmann::json& v = value(key);
    const double x = v.is_number() ? v.get<double>() : std::nan("");
    const bool above_min = min_exclusive ? x > min : x >= min;
    if (!v.is_number() || !std::isfinite(x) || !above_min || x > max)
        throw UsageError(name(key) + " must be a finite number " + range_text(min, max, min_exclusive) + ", got " +
                         v.dump());
    return x;
}

std::optional<double> JsonFields::optional_number(const std::string& key, double min, double max,
                                                  bool min_exclusive) const {
    if (!has(key)) return std::nullopt;
    return number(key, min, max, min_exclusive);
}

std::string JsonFields::string(const std::string& key) const {
    const nlohmann::json& v = value(key);
    if (!v.is_string()) throw UsageError(name(key) + " must be a string, got " + v.dump());
    return v.get<std::string>();
}

std::optional<std::string> JsonFields::optional_string(const std::string& key) const {
    if (!has(key)) return std::nullopt;
    return string(key);
}

JsonFields JsonFields::object(const std::string& key) const {
    const nlohmann::json& v = value(key);
    if (!v.is_object()) throw UsageError(name(key) + " must be a JSON object, got " + std::string(v.type_name()));
    return JsonFields(v, source_, path_.empty() ? key : path_ + "." + key);
}

const nlohmann::json& JsonFields::array(const std::string& key) const {
    const nlohmann::json& v = value(key);
    if (!v.is_array()) throw UsageError(name(key) + " must be a JSON array, got " + std::string(v.type_name()));
    return v;
}

JsonFields JsonFields::element(const std::string& key, std::size_t index) const {
    const nlohmann::json& list = array(key);
    const std::string place = (path_.empty() ? key : path_ + "." + key) + "[" + std::to_string(index) + "]";
    if (index >= list.size()) throw UsageError(source_ + ": \"" + place + "\" is missing");
    if (!list[index].is_object())
        throw UsageError(source_ + ": \"" + place + "\" must be a JSON object, got " + list[index].type_name());
    return JsonFields(list[index], source_, place);
}

void JsonFields::refuse_unknown_keys(const std::set<std::string>& known) const {
    for (const auto& [key, unused] : object_.items()) {
        if (known.count(key)) continue;
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
        throw UsageError(name(key) + " is not a known key (known: " + list + ")");
    }
}

}  // namespace parbench
