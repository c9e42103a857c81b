#include "layer_shard_plan.hpp"

#include <moequant/error.hpp>
#include <moequant/sharded_writer.hpp>

namespace moequant::formats {

namespace {

[[noreturn]] void not_a_moe_layer(std::int64_t layer) {
    throw Error(ErrorKind::internal, "layer " + std::to_string(layer) + " is not a MoE layer of the plan");
}

}  // namespace

LayerShardPlan::LayerShardPlan(const ModelPlan& plan, bool has_other_tensors) {
    const std::size_t shards = plan.moe_layers.size() + (has_other_tensors ? 1 : 0);
    for (std::size_t i = 0; i < plan.moe_layers.size(); ++i)
        layer_shards_[plan.moe_layers[i].layer] = shard_file_name(i + 1, shards);
    if (has_other_tensors) other_shard_ = shard_file_name(shards, shards);
}

const std::string& LayerShardPlan::layer_shard(std::int64_t layer) const {
    const auto it = layer_shards_.find(layer);
    if (it == layer_shards_.end()) not_a_moe_layer(layer);
    return it->second;
}

const MoeLayerPlan& planned_moe_layer(const ModelPlan& plan, std::int64_t layer) {
    const MoeLayerPlan* found = plan.moe_layer(layer);
    if (!found) not_a_moe_layer(layer);
    return *found;
}

}  // namespace moequant::formats
