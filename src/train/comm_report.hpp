// The communication part of a training report: per parallel dimension, the time in calls and
// the exposed part of it, the reported rank's calls and bytes beside the traffic its layout
// implies (theory/traffic.hpp), and the straggler, the rank the others wait for.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "train/train_report.hpp"

namespace parbench {

// "comm" of a train result (see the method strings it carries).
nlohmann::json comm_result_json(const TrainSummaryInputs& inputs);

// "stragglers" of a train result: from each rank's compute time outside communication per
// step, the rank that was slowest most often, its host, and how much slower it was; null for
// a world of one.
nlohmann::json straggler_json(const TrainMeasurements& measurements, const MeshShape& mesh);
// A warning naming the rank and host when one rank is consistently the one waited for.
std::vector<std::string> straggler_warnings(const nlohmann::json& stragglers, const MeshShape& mesh);

void print_comm_summary(std::ostream& out, const nlohmann::json& result);

}  // namespace parbench
