// STREAM's triad (McCalpin, "Memory Bandwidth and Machine Balance in Current High Performance
// Computers", IEEE TCCA newsletter 1995; www.cs.virginia.edu/stream): a[i] = b[i] + s c[i], two
// arrays read and one written per element, so a pass over n elements moves 3 n elements (the
// benchmark's own count: no write-allocate traffic counted). The --background stream load runs it
// on CPU ranks and on GPUs from this one formula.
#pragma once

#include "host_device.hpp"

namespace parbench {

// STREAM's own scalar.
constexpr float stream_triad_scalar = 3.0f;

PARBENCH_HD float stream_triad(float b, float c) { return b + stream_triad_scalar * c; }

}  // namespace parbench
