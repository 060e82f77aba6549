// Fuzz target: compare's report loader. Any text, read as a report and compared with itself,
// is either lined up and rendered in every format, or refused with a UsageError naming it;
// a JSON-library exception or a crash is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_file.hpp"
#include "report/compare.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const nlohmann::json document = parbench::parse_json_text(text, "fuzz.json");
        const std::vector<parbench::LabelledReport> reports{{"a.json", document}, {"b.json", document}};
        const parbench::Comparison comparison = parbench::compare_reports(reports);
        for (auto format : {parbench::CompareFormat::console, parbench::CompareFormat::markdown,
                            parbench::CompareFormat::csv})
            (void)parbench::render(comparison, format);
        (void)parbench::below_threshold(comparison, 0.9);
    } catch (const parbench::UsageError&) {
    }
    return 0;
}
