// Routed-expert tensors a plan holds beside the experts' gate/up/down weights (gpt-oss's fused
// expert biases): formats whose runtime applies each expert as three bias-free matrices
// (kt-kernel's AMX methods, per-expert compressed-tensors Linears) have no place for them and
// refuse the job before anything is written, instead of dropping them. Header-only.
#pragma once

#include <moequant/error.hpp>
#include <moequant/output_format.hpp>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::formats {

// Tensors with role routed_expert that are no planned expert weight (nor a stored tensor of one).
inline std::vector<std::string> extra_expert_tensors(const Checkpoint& source, const ModelPlan& plan) {
    std::set<std::string> weights;
    for (const auto& layer : plan.moe_layers)
        for (const auto& expert : layer.experts)
            for (const auto& w : expert.weights) weights.insert(w.tensor);
    std::vector<std::string> out;
    for (const auto& [name, role] : plan.roles) {
        if (role != TensorRole::routed_expert) continue;
        const EncodedWeight* w = source.weight_holding(name);
        if (!weights.count(w ? w->name : name)) out.push_back(name);
    }
    return out;
}

// Error(input, "UnsupportedExpertTensors") naming the first such tensor, when there is one.
inline void refuse_extra_expert_tensors(const OutputContext& context, std::string_view format) {
    if (!context.source || !context.plan) return;
    const auto extra = extra_expert_tensors(*context.source, *context.plan);
    if (extra.empty()) return;
    throw Error(ErrorKind::input,
                "format '" + std::string(format) + "' cannot hold the routed experts of " + context.plan->family +
                    ": " + std::to_string(extra.size()) + " expert tensor(s) such as expert biases are no gate/up/down "
                    "weight, and its experts are bias-free SwiGLU matrices",
                {.file = context.source->directory().string(),
                 .tensor = extra.front(),
                 .code = "UnsupportedExpertTensors",
                 .hint = "--format bf16-safetensors exports them"});
}

}  // namespace moequant::formats
