// Printing a ModelPlan: the summary `inspect` shows (family, MoE layers, expert shapes and
// dtypes, roles, skipped tensors and why, warnings) as text or JSON, optionally in full.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/model_adapter.hpp>

#include <boost/json/object.hpp>

#include <ostream>

namespace moequant::cli {

struct PlanReport {
    const ModelPlan& plan;
    const Checkpoint& source;  // the planned checkpoint (each weight's encoding)
    bool overridden = false;  // the family came from --family
};

void print_plan_text(std::ostream& out, const PlanReport& report, bool full);
boost::json::object plan_json(const PlanReport& report, bool full);

}  // namespace moequant::cli
