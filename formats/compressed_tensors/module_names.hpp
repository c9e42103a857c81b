// compressed-tensors module names of routed experts (conventions.md §4,
// gptq-compressed-tensors.md §6.4): the source's own per-expert module names (DeepSeek/Qwen/GLM
// `mlp.experts.E.{gate,up,down}_proj`, Mixtral `block_sparse_moe.experts.E.{w1,w3,w2}`); fused
// sources are written per expert as `<experts>.E.{gate,up,down}_proj`, what llm-compressor's
// linearization produces.
#pragma once

#include <moequant/model_adapter.hpp>

#include <string>

namespace moequant::formats {

inline std::string expert_module_name(const ExpertWeightSource& source, std::int64_t expert, Projection p) {
    const std::string& t = source.tensor;
    if (!source.slice) return t.ends_with(".weight") ? t.substr(0, t.size() - 7) : t;
    const std::size_t dot = t.rfind('.');  // "<...>.experts.gate_up_proj" -> "<...>.experts"
    return t.substr(0, dot) + "." + std::to_string(expert) + "." + std::string(projection_name(p)) + "_proj";
}

}  // namespace moequant::formats
