// Which shard of a merged safetensors output holds what: one shard per MoE layer of the plan,
// in plan order, then one shard for every other tensor (when there is any). The names are
// fixed from the plan up front, so a resumed run never renumbers a shard.
#pragma once

#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <map>
#include <string>

namespace moequant::formats {

class LayerShardPlan {
public:
    LayerShardPlan() = default;
    LayerShardPlan(const ModelPlan& plan, bool has_other_tensors);

    // The shard of MoE layer `layer` (Error(internal) when the plan has no such MoE layer).
    const std::string& layer_shard(std::int64_t layer) const;
    // The shard of every other tensor; empty when there is none.
    const std::string& other_shard() const noexcept { return other_shard_; }

private:
    std::map<std::int64_t, std::string> layer_shards_;
    std::string other_shard_;
};

// The plan of MoE layer `layer`, which the host only ever asks a format about (Error(internal)
// otherwise).
const MoeLayerPlan& planned_moe_layer(const ModelPlan& plan, std::int64_t layer);

}  // namespace moequant::formats
