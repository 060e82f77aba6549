// The pipeline part of a training report: the bubble measured from every rank's timeline
// beside the schedule's formula, transfers, activation memory per stage, and the trace.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <vector>

#include "train/memory_ledger.hpp"
#include "train/mesh.hpp"
#include "train/train_options.hpp"
#include "train/train_run.hpp"

namespace parbench {

// Adds "bubble" {measured, measured_per_stage, theoretical, formula, ...} and "pipeline"
// {schedule, stages, transfers, activation memory per stage} to a train result.
void add_pipeline_results(nlohmann::json& result, const TrainPlan& plan, const MeshShape& mesh,
                          const PipelineMeasurements& pipeline, const std::vector<MemoryUsage>& memory_by_rank);
void print_pipeline_summary(std::ostream& out, const nlohmann::json& result);

// Every rank's timeline of the timed steps as a Chrome trace (report/chrome_trace.hpp).
nlohmann::json pipeline_trace_json(const TrainPlan& plan, const MeshShape& mesh, const PipelineMeasurements& pipeline);

}  // namespace parbench
