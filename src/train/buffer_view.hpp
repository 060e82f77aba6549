// A window into a buffer that does not own it: for device copies at an offset.
#pragma once

#include <cstddef>

#include "device/device.hpp"

namespace parbench {

inline Buffer buffer_view(const Buffer& buffer, std::size_t offset_bytes, std::size_t bytes) {
    return Buffer(buffer.as<char>() + offset_bytes, bytes, nullptr);
}

}  // namespace parbench
