#include "theory/memory_category.hpp"

namespace parbench {

std::string memory_category_name(MemoryCategory category) {
    switch (category) {
        case MemoryCategory::params: return "params";
        case MemoryCategory::grads: return "grads";
        case MemoryCategory::optimizer: return "optimizer";
        case MemoryCategory::activations: return "activations";
    }
    return "?";
}

}  // namespace parbench
