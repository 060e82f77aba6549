#include "core/size_parse.hpp"

#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.hpp"

namespace parbench {

std::uint64_t parse_size(std::string_view text, std::string_view flag) {
    const std::string shown(text);
    auto fail = [&](const std::string& why) -> UsageError {
        return UsageError(std::string(flag) + " '" + shown + "': " + why +
                          "; write a positive byte count such as 8, 64K, 100M or 1G (binary units)");
    };
    std::size_t digits = 0;
    while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
        ++digits;
    if (digits == 0) throw fail(text.empty() ? "empty size" : "not a number");
    double value = 0.0;
    try {
        std::size_t used = 0;
        value = std::stod(std::string(text.substr(0, digits)), &used);
        if (used != digits) throw fail("not a number");
    } catch (const std::logic_error&) {
        throw fail("not a number");
    }
    std::string_view suffix = text.substr(digits);
    double scale = 1.0;
    if (!suffix.empty()) {
        switch (std::toupper(static_cast<unsigned char>(suffix.front()))) {
            case 'B': scale = 1.0; break;
            case 'K': scale = 1024.0; break;
            case 'M': scale = 1024.0 * 1024.0; break;
            case 'G': scale = 1024.0 * 1024.0 * 1024.0; break;
            case 'T': scale = 1024.0 * 1024.0 * 1024.0 * 1024.0; break;
            default: throw fail("unknown unit");
        }
        const std::string_view rest = suffix.substr(1);
        if (!(rest.empty() || rest == "B" || rest == "b" || rest == "iB" || rest == "ib"))
            throw fail("unknown unit");
        if ((suffix.front() == 'B' || suffix.front() == 'b') && !rest.empty()) throw fail("unknown unit");
    }
    const double bytes = value * scale;
    if (bytes < 1.0) throw fail("size must be at least 1 byte");
    if (bytes != std::floor(bytes)) throw fail("not a whole number of bytes");
    if (bytes > static_cast<double>(std::numeric_limits<std::int64_t>::max())) throw fail("too large");
    return static_cast<std::uint64_t>(bytes);
}

std::string format_size(std::uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024.0 && unit < 4) {
        value /= 1024.0;
        ++unit;
    }
    std::ostringstream text;
    text << value << units[unit];
    return text.str();
}

std::vector<std::uint64_t> geometric_sizes(std::uint64_t min, std::uint64_t max, double factor) {
    std::vector<std::uint64_t> sizes;
    if (factor <= 1.0) {
        sizes.push_back(min);
        if (max != min) sizes.push_back(max);
        return sizes;
    }
    for (double size = static_cast<double>(min); size <= static_cast<double>(max) * (1.0 + 1e-12); size *= factor)
        sizes.push_back(static_cast<std::uint64_t>(std::llround(size)));
    return sizes;
}

std::vector<std::uint64_t> linear_sizes(std::uint64_t min, std::uint64_t max, std::uint64_t step) {
    std::vector<std::uint64_t> sizes;
    for (std::uint64_t size = min; size <= max; size += step) {
        sizes.push_back(size);
        if (max - size < step) break;  // the next would pass max (or wrap around)
    }
    return sizes;
}

}  // namespace parbench
