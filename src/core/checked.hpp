// Every number that enters parbench passes here once: a flag's value or a file's key is finite,
// in its range and integral where it must be, and a product of sizes is computed without
// wrapping. A value that is not is refused with one UsageError line naming the flag (or the file
// and the key), the value, and the range that would be accepted.
//
// Names: a flag is named as the user typed it ("--seq"); a file's key as "--cluster c.json:
// \"device.intra_host.busbw_gbps\"" (the option that brought the file in, the path, the key path).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace parbench {

// value in [min, max], else UsageError "NAME VALUE: must be an integer from MIN to MAX[; HINT]".
std::int64_t check_int(std::int64_t value, std::string_view name, std::int64_t min, std::int64_t max,
                       std::string_view hint = {});
// value finite and in [min, max] (or (min, max] when min_exclusive), else UsageError naming it.
double check_number(double value, std::string_view name, double min, double max, bool min_exclusive = false,
                    std::string_view hint = {});
// Text as a finite decimal number, the whole of it ("1.5", "2e3"; not "nan", "inf", "1x").
double parse_finite(std::string_view text, std::string_view name);

// a x b x ... of non-negative sizes; UsageError "WHAT = a x b x ... exceeds LIMIT[; HINT]" when the
// exact product is above `limit` (never wraps: checked before each multiplication).
std::uint64_t checked_product(std::initializer_list<std::uint64_t> factors, std::string_view what,
                              std::uint64_t limit, std::string_view hint = {});

// The largest integer a double holds exactly (2^53): sizes that plan computes in double stay exact
// below it.
inline constexpr std::uint64_t exact_in_double = std::uint64_t{1} << 53;

// The keys of one JSON object of a file, read with their ranges checked. `source` names the file
// as the user gave it ("--cluster c.json"); `path` the object's place in it ("" for the root,
// "device", "results[3]"). Every refusal is one UsageError naming source and key path.
class JsonFields {
  public:
    // UsageError when `object` is not a JSON object.
    JsonFields(const nlohmann::json& object, std::string source, std::string path = {});

    bool has(const std::string& key) const;
    // Integral numbers (8 and 8.0 alike, as JSON Schema's "integer") in [min, max].
    std::int64_t integer(const std::string& key, std::int64_t min, std::int64_t max) const;
    std::optional<std::int64_t> optional_integer(const std::string& key, std::int64_t min, std::int64_t max) const;
    // Finite numbers in [min, max] (or (min, max]).
    double number(const std::string& key, double min, double max, bool min_exclusive = false) const;
    std::optional<double> optional_number(const std::string& key, double min, double max,
                                          bool min_exclusive = false) const;
    std::string string(const std::string& key) const;
    std::optional<std::string> optional_string(const std::string& key) const;
    JsonFields object(const std::string& key) const;
    // The array itself, checked to be one (its elements are read with element()).
    const nlohmann::json& array(const std::string& key) const;
    JsonFields element(const std::string& key, std::size_t index) const;
    // UsageError for the first key not in `known` (a typo never silently changes the input).
    void refuse_unknown_keys(const std::set<std::string>& known) const;

    const nlohmann::json& json() const { return object_; }
    // "--cluster c.json: \"device.gpus\"": the prefix of a message about `key`.
    std::string name(const std::string& key) const;

  private:
    const nlohmann::json& value(const std::string& key) const;  // UsageError when missing
    const nlohmann::json& object_;
    std::string source_, path_;
};

}  // namespace parbench
