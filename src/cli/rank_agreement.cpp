#include "cli/rank_agreement.hpp"

#include <vector>

#include "core/error.hpp"
#include "report/json_file.hpp"

namespace parbench {

void throw_if_any_rank_failed(Communicator& control, const std::optional<std::string>& local_error) {
    const int mine = local_error ? control.rank() : control.size();
    int first = control.size();
    control.allreduce(&mine, &first, 1, DType::int32, ReduceOp::min);
    if (first == control.size()) return;
    std::int64_t length = local_error ? static_cast<std::int64_t>(local_error->size()) : 0;
    control.broadcast(&length, &length, 1, DType::int64, first);
    std::string message = local_error.value_or(std::string());
    message.resize(static_cast<std::size_t>(length));
    control.broadcast(message.data(), message.data(), static_cast<std::size_t>(length), DType::uint8, first);
    throw UsageError(message);
}

void check_outputs_writable(Communicator& control, std::initializer_list<OutputFile> outputs) {
    std::optional<std::string> error;
    if (control.rank() == 0) {
        try {
            for (const OutputFile& output : outputs)
                if (!output.path.empty()) check_writable(output.path, output.flag);
        } catch (const UsageError& failure) {
            error = failure.what();
        }
    }
    throw_if_any_rank_failed(control, error);
}

}  // namespace parbench
