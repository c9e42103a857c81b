#include "rule_based_adapter.hpp"

#include "plan_builder.hpp"

#include <moequant/decoder_forward.hpp>
#include <moequant/error.hpp>

namespace moequant::adapters {

int RuleBasedAdapter::match(const ModelConfig& config, const Checkpoint&) const { return match_family(rules_, config); }

ModelPlan RuleBasedAdapter::plan(const ModelConfig& config, const Checkpoint& checkpoint) const {
    ModelPlan plan = build_plan(rules_, config, checkpoint);
    add_warnings(config, plan);
    if (rules_.unmodelled_routing) plan.warnings.push_back(rules_.unmodelled_routing->warning);
    return plan;
}

void RuleBasedAdapter::add_warnings(const ModelConfig&, ModelPlan&) const {}

std::unique_ptr<DecoderForward> RuleBasedAdapter::decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                                  const ModelPlan& plan) const {
    if (!rules_.unmodelled_routing) return ModelAdapter::decoder_forward(config, checkpoint, plan);
    throw Error(ErrorKind::plugin,
                "family '" + rules_.id + "' has no calibration forward pass, and its router is not "
                "modelled for recorded activations either",
                {.code = "NoForward", .hint = rules_.unmodelled_routing->forward_hint});
}

}  // namespace moequant::adapters
