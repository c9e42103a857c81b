// Building a ModelPlan from a family's rules, the config and the checkpoint's tensor headers.
//
// Every routed-expert weight the config implies must exist with the implied shape, in an
// encoding an installed encoding plugin recognises (Checkpoint::weight(), which refuses FP8
// without its scale, scales of the wrong shape, ...); fused layouts (model-families.md §2.5) are told apart from both tensor shapes and are
// refused when neither layout fits. Errors name the tensor or config key and what was expected.
#pragma once

#include "family_rules.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/model_config.hpp>

namespace moequant::adapters {

// 0 when the config's model_type (text_config first, then the root) is not the family's;
// otherwise 100, plus 10 when `architectures` also names one of the family's classes.
int match_family(const FamilyRules& rules, const ModelConfig& config);

ModelPlan build_plan(const FamilyRules& rules, const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace moequant::adapters
