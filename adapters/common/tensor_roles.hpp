// The role of a checkpoint tensor that is not a routed-expert weight, from its name alone
// (model-families.md §2.2, §2.3): attention, router, shared expert, dense MLP, norm, embedding,
// head, skipped MTP layer or buffer, or other. Routed experts are marked by the plan builder,
// which knows exactly which tensors it planned.
#pragma once

#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::adapters {

// A name split at its decoder layer: "model.layers.12.mlp.gate.weight" ->
// {prefix "model.layers.", layer 12, rest "mlp.gate.weight"}.
struct LayerName {
    std::string_view prefix;
    std::int64_t layer = 0;
    std::string_view rest;
};

// Splits `name` with the first of `prefixes` it starts with, followed by digits and a dot.
std::optional<LayerName> split_layer_name(std::string_view name, const std::vector<std::string>& prefixes);

struct RoleContext {
    std::vector<std::string> layer_prefixes;
    std::int64_t num_hidden_layers = 0;
    std::vector<bool> moe_layer;  // indexed by layer < num_hidden_layers
};

// Role of a tensor that is not a planned routed-expert weight.
TensorRole classify_tensor(std::string_view name, const RoleContext& context);

}  // namespace moequant::adapters
