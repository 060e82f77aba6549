#include "device/host_pages.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace parbench {
namespace {

// The first line of a file, "" when it cannot be read.
std::string first_line(const std::string& path) {
    std::ifstream file(path);
    std::string line;
    std::getline(file, line);
    return line;
}

bool parse_hex(std::string_view text, std::uintptr_t& value) {
    if (text.empty()) return false;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
    return error == std::errc() && end == text.data() + text.size();
}

// A mapping's first line: "7f1c2a000000-7f1c2a400000 rw-p 00000000 00:00 0 ...".
bool parse_mapping(std::string_view line, std::uintptr_t& begin, std::uintptr_t& end) {
    const std::size_t space = line.find(' ');
    const std::string_view range = line.substr(0, space);
    const std::size_t dash = range.find('-');
    return dash != std::string_view::npos && parse_hex(range.substr(0, dash), begin) &&
           parse_hex(range.substr(dash + 1), end);
}

}  // namespace

std::optional<BufferPages> parse_buffer_pages(std::string_view text) {
    if (text == "normal") return BufferPages::normal;
    if (text == "huge") return BufferPages::huge;
    return std::nullopt;
}

std::string buffer_pages_name(BufferPages pages) { return pages == BufferPages::huge ? "huge" : "normal"; }

std::string selected_choice(std::string_view line) {
    const std::size_t open = line.find('[');
    const std::size_t close = line.find(']', open);
    if (open == std::string_view::npos || close == std::string_view::npos) return "";
    return std::string(line.substr(open + 1, close - open - 1));
}

ThpSetting read_thp_setting(const std::string& root) {
    ThpSetting setting;
    setting.enabled = selected_choice(first_line(root + "/enabled"));
    // Kernels from 6.8 set each page size apart (multi-size THP); "inherit" takes the top-level word.
    const std::string pmd = selected_choice(first_line(root + "/hugepages-2048kB/enabled"));
    if (!pmd.empty() && pmd != "inherit") setting.enabled = pmd;
    setting.defrag = selected_choice(first_line(root + "/defrag"));
    if (setting.enabled.empty()) setting.enabled = "unavailable";
    if (setting.defrag.empty()) setting.defrag = "unavailable";
    return setting;
}

std::uint64_t huge_page_capacity(std::uintptr_t begin, std::uintptr_t end) {
    const std::uintptr_t first = (begin + transparent_huge_page_bytes - 1) / transparent_huge_page_bytes;
    const std::uintptr_t last = end / transparent_huge_page_bytes;
    return last > first ? static_cast<std::uint64_t>(last - first) * transparent_huge_page_bytes : 0;
}

std::uint64_t huge_bytes_in_range(std::string_view smaps, std::uintptr_t begin, std::uintptr_t end) {
    std::uint64_t total = 0;
    std::uint64_t overlap = 0;  // of the current mapping with [begin, end); 0 when it lies outside
    std::size_t position = 0;
    while (position < smaps.size()) {
        std::size_t next = smaps.find('\n', position);
        if (next == std::string_view::npos) next = smaps.size();
        const std::string_view line = smaps.substr(position, next - position);
        position = next + 1;
        std::uintptr_t mapping_begin = 0, mapping_end = 0;
        if (parse_mapping(line, mapping_begin, mapping_end)) {
            const std::uintptr_t low = std::max(begin, mapping_begin), high = std::min(end, mapping_end);
            overlap = high > low ? high - low : 0;
            continue;
        }
        constexpr std::string_view key = "AnonHugePages:";
        if (overlap == 0 || line.substr(0, key.size()) != key) continue;
        std::string_view value = line.substr(key.size());
        value.remove_prefix(std::min(value.find_first_not_of(' '), value.size()));
        std::uint64_t kib = 0;
        std::from_chars(value.data(), value.data() + value.size(), kib);  // "2048 kB"; 0 when unreadable
        total += std::min<std::uint64_t>(kib * 1024, overlap);
    }
    return total;
}

std::optional<std::uint64_t> huge_bytes_of(const void* data, std::size_t bytes) {
    std::ifstream file("/proc/self/smaps");
    if (!file) return std::nullopt;
    std::ostringstream text;
    text << file.rdbuf();
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    return huge_bytes_in_range(text.str(), begin, begin + bytes);
}

}  // namespace parbench
