#include "rule_based_adapter.hpp"

#include "plan_builder.hpp"

namespace moequant::adapters {

int RuleBasedAdapter::match(const ModelConfig& config, const Checkpoint&) const { return match_family(rules_, config); }

ModelPlan RuleBasedAdapter::plan(const ModelConfig& config, const Checkpoint& checkpoint) const {
    return build_plan(rules_, config, checkpoint);
}

}  // namespace moequant::adapters
