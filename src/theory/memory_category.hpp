// What a byte of a rank's memory holds, as the engine's ledger (train/memory_ledger.hpp) tags it
// and the memory formulas (theory/memory.hpp) count it.
#pragma once

#include <cstddef>
#include <string>

namespace parbench {

// ZeRO's categories (arXiv 1910.02054 sec. 3): model states are parameters, gradients and
// optimizer states; everything a forward/backward pass keeps or scratches is activations.
enum class MemoryCategory { params, grads, optimizer, activations };
inline constexpr std::size_t memory_category_count = 4;
std::string memory_category_name(MemoryCategory category);

}  // namespace parbench
