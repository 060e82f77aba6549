// Tests of refused input check the message, not just the exception type: it must name
// the flag and the fix.
#pragma once

#include <functional>
#include <string>

#include "core/error.hpp"

namespace parbench::testing {

// The UsageError message `action` throws, or "" when it throws none.
inline std::string usage_error_text(const std::function<void()>& action) {
    try {
        action();
    } catch (const UsageError& error) {
        return error.what();
    }
    return "";
}

}  // namespace parbench::testing
