// Report files are written whole or not at all: a temporary file beside the target, then
// rename(2), so a crash or a full disk never leaves half a report.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace parbench {

// Throws UsageError naming `flag` when the file's folder does not exist or is not writable:
// checked before a run starts, so no time is spent measuring what cannot be saved.
void check_writable(const std::string& path, const std::string& flag);

// Whether two output paths name one file (both given, equal once made absolute and normal,
// symbolic links followed where they exist): one report would overwrite the other.
bool same_file(const std::string& a, const std::string& b);

void write_text_atomically(const std::string& path, const std::string& text);
void write_json_atomically(const std::string& path, const nlohmann::json& document);

// Throws UsageError naming the file when it cannot be read or parsed.
nlohmann::json read_json_file(const std::string& path);
// The same for text already read; `name` names it in the message.
nlohmann::json parse_json_text(const std::string& text, const std::string& name);

}  // namespace parbench
