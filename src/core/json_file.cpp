#include "core/json_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.hpp"

namespace parbench {
namespace {

std::filesystem::path folder_of(const std::string& path) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    return parent.empty() ? std::filesystem::path(".") : parent;
}

}  // namespace

void check_writable(const std::string& path, const std::string& flag) {
    const std::filesystem::path folder = folder_of(path);
    std::error_code error;
    if (!std::filesystem::is_directory(folder, error))
        throw UsageError(flag + " '" + path + "': folder '" + folder.string() +
                         "' does not exist; create it or choose another path");
    if (std::filesystem::is_directory(path, error))
        throw UsageError(flag + " '" + path + "' is a folder; give a file name");
    if (::access(folder.c_str(), W_OK) != 0)
        throw UsageError(flag + " '" + path + "': folder '" + folder.string() +
                         "' is not writable; choose another path");
}

bool same_file(const std::string& a, const std::string& b) {
    if (a.empty() || b.empty()) return false;
    std::error_code error_a, error_b;
    const auto canonical_a = std::filesystem::weakly_canonical(a, error_a);
    const auto canonical_b = std::filesystem::weakly_canonical(b, error_b);
    if (error_a || error_b) return a == b;
    return canonical_a == canonical_b;
}

void write_text_atomically(const std::string& path, const std::string& text) {
    const std::string temporary = path + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) throw RuntimeFailure("cannot create '" + temporary + "': " + std::strerror(errno));
        out << text;
        out.flush();
        if (!out) {
            std::remove(temporary.c_str());
            throw RuntimeFailure("cannot write '" + temporary + "': " + std::strerror(errno));
        }
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
        const std::string reason = std::strerror(errno);
        std::remove(temporary.c_str());
        throw RuntimeFailure("rename('" + temporary + "', '" + path + "') failed: " + reason);
    }
}

void write_json_atomically(const std::string& path, const nlohmann::json& document) {
    write_text_atomically(path, document.dump(2) + "\n");
}

nlohmann::json read_json_file(const std::string& path) {
    std::error_code error_code;
    if (std::filesystem::is_directory(path, error_code))
        throw UsageError("'" + path + "' is a folder; give a JSON file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError("cannot read '" + path + "': " + std::strerror(errno) + "; check the path");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw UsageError("cannot read '" + path + "': " + std::strerror(errno) + "; check the path");
    return parse_json_text(text, path);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& name) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& error) {
        const bool truncated = text.find_first_not_of(" \t\r\n") != std::string::npos &&
                               std::string(error.what()).find("unexpected end of input") != std::string::npos;
        throw UsageError("'" + name + "' is not valid JSON" + (truncated ? " (it ends early: truncated?)" : "") + " (" +
                         error.what() + "); give a parbench report");
    }
}

}  // namespace parbench
