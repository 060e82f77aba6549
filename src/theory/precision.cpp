#include "theory/precision.hpp"

#include "core/error.hpp"

namespace parbench {

Precision parse_precision(const std::string& name) {
    if (name == "fp32") return Precision::fp32;
    if (name == "bf16") return Precision::bf16;
    throw UsageError("--precision '" + name + "': use fp32 or bf16");
}

std::string precision_name(Precision precision) { return precision == Precision::bf16 ? "bf16" : "fp32"; }

}  // namespace parbench
