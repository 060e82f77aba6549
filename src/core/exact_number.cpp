#include "core/exact_number.hpp"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <sstream>

namespace parbench {

std::string exact_number_text(double value) {
    if (std::isnan(value)) {
        std::ostringstream text;
        text << "nan(0x" << std::hex << std::bit_cast<std::uint64_t>(value) << ")";
        return text.str();
    }
    char buffer[32];  // the longest shortest form, "-2.2250738585072014e-308", is 24 characters
    const auto written = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, written.ptr);
}

}  // namespace parbench
