// `parbench plan`'s outputs: the parbench.plan/v1 JSON document (schemas/plan.schema.json),
// a console summary and a Markdown table, all from the same predictions.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "plan/layout_plan.hpp"
#include "plan/layout_search.hpp"

namespace parbench {

struct PlanInputs {
    nlohmann::json model;     // the config and where it came from
    nlohmann::json cluster;
    nlohmann::json compute;   // the rate and its source
    nlohmann::json comm;      // fits and the preset links, with sources
    nlohmann::json pass_costs;
    nlohmann::json states;    // the byte convention used and why (the flag, or the default's reason)
    nlohmann::json batch;     // the global batch and why (plan/global_batch.hpp)
};

nlohmann::json plan_document(const PlanInputs& inputs, const std::vector<PlanPrediction>& layouts,
                             const SearchResult* search, const std::vector<std::string>& argv);
void print_plan_console(std::ostream& out, const PlanInputs& inputs, const std::vector<PlanPrediction>& layouts,
                        const SearchResult* search);
// mfu_assumed: the compute rate is not calibrated, so the MFU column is an assumption (said so).
void print_plan_markdown(std::ostream& out, const std::vector<PlanPrediction>& layouts, const SearchResult* search,
                         bool mfu_assumed);

}  // namespace parbench
