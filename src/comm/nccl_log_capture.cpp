#include "comm/nccl_log_capture.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

extern char** environ;

namespace parbench {

NcclLogCapture::NcclLogCapture(NcclLogLevel level) : level_(level) {
    if (level == NcclLogLevel::none) {
        reason_ = "not asked for";
        return;
    }
    for (const char* variable : {"NCCL_DEBUG", "NCCL_DEBUG_FILE"})
        if (const char* value = std::getenv(variable)) {
            reason_ = std::string(variable) + "=" + value + " is set by the user: NCCL's log is theirs, parbench reads "
                      "none of it (unset it to have the report say what NCCL chose)";
            return;
        }
    std::error_code error;
    const std::filesystem::path folder = std::filesystem::temp_directory_path(error);
    path_ = (error ? std::filesystem::path("/tmp") : folder) /
            ("parbench-nccl-" + std::to_string(static_cast<long>(getpid())) + ".log");
    std::filesystem::remove(path_, error);  // a file left by an earlier process of this id
    const std::string subsystems = level == NcclLogLevel::per_call ? "INIT,ENV,NET,TUNING" : "INIT,ENV,NET";
    for (const auto& [variable, value] :
         {std::pair<const char*, std::string>{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", subsystems},
          {"NCCL_DEBUG_FILE", path_}}) {
        const char* before = std::getenv(variable);
        saved_.emplace_back(variable, before ? std::optional<std::string>(before) : std::nullopt);
        setenv(variable, value.c_str(), 1);
    }
}

NcclLogCapture::~NcclLogCapture() {
    for (const auto& [variable, value] : saved_) {
        if (value)
            setenv(variable.c_str(), value->c_str(), 1);
        else
            unsetenv(variable.c_str());
    }
    if (!path_.empty()) {
        std::error_code error;
        std::filesystem::remove(path_, error);
    }
}

std::string NcclLogCapture::read_new() {
    if (!capturing()) return {};
    std::ifstream file(path_, std::ios::binary);
    if (!file) return {};  // NCCL has not logged yet
    file.seekg(static_cast<std::streamoff>(offset_));
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    // Only whole lines: NCCL may be writing the last one.
    const std::size_t end = text.rfind('\n');
    if (end == std::string::npos) return {};
    text.resize(end + 1);
    offset_ += text.size();
    return text;
}

nlohmann::json nccl_environment() {
    nlohmann::json variables = nlohmann::json::object();
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        const char* equals = std::strchr(*entry, '=');
        if (equals == nullptr || std::strncmp(*entry, "NCCL_", 5) != 0) continue;
        variables[std::string(*entry, static_cast<std::size_t>(equals - *entry))] = std::string(equals + 1);
    }
    return variables;
}

}  // namespace parbench
