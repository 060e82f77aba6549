// The report entry and the console summary of a training run: what a researcher choosing a
// layout needs (time, throughput, FLOPs and MFU, memory measured and in theory,
// communication, loss, the check), with the method behind each number stated.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "train/mesh.hpp"
#include "train/metrics.hpp"
#include "train/train_options.hpp"
#include "train/train_run.hpp"

namespace parbench {

struct TrainSummaryInputs {
    const TrainPlan& plan;
    const MeshShape& mesh;
    std::string scheme_name;
    const TrainMeasurements& measurements;
    const PeakFlops& peak;
    std::optional<CheckResult> check;
};

nlohmann::json train_result_json(const TrainSummaryInputs& inputs);
// Step-time warnings, each with what to change.
std::vector<std::string> train_warnings(const TrainMeasurements& measurements);

void print_train_header(std::ostream& out, const TrainPlan& plan, const MeshShape& mesh, std::size_t parameters,
                        const std::string& device_kind);
void print_train_summary(std::ostream& out, const nlohmann::json& result);

std::string scheme_name(const TrainPlan& plan);

}  // namespace parbench
