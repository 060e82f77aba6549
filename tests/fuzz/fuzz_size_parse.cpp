// Fuzz target: --size parsing. Any text either parses to a size of at least one byte that
// formats back, or is refused with a UsageError; nothing else may happen.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.hpp"
#include "core/size_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const std::uint64_t bytes = parbench::parse_size(text, "--size");
        if (bytes < 1) __builtin_trap();
        (void)parbench::format_size(bytes);
    } catch (const parbench::UsageError&) {
    }
    return 0;
}
