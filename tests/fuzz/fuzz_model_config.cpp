// Fuzz target: model config loading (the text of a --model file). Any text either gives a
// config whose sizes are positive, or is refused with a UsageError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/json_file.hpp"
#include "theory/model_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const parbench::ModelConfig config =
            parbench::parse_model_config(parbench::parse_json_text(text, "fuzz.json"), "fuzz", "fuzz.json");
        if (config.layers < 1 || config.hidden < 1) __builtin_trap();
        (void)parbench::to_json(config).dump();
    } catch (const parbench::UsageError&) {
    }
    return 0;
}
