#include "gqa_family_adapter.hpp"

namespace moequant::adapters {

std::unique_ptr<DecoderForward> GqaFamilyAdapter::decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                                  const ModelPlan& plan) const {
    GqaAttentionSpec attention = gqa_attention_from_config(config);
    adjust_attention(config, attention);
    DecoderSpec decoder = decoder_spec_from_config(config, checkpoint);
    adjust_decoder(config, plan, decoder);
    return make_gqa_decoder(std::move(decoder), attention, checkpoint, plan);
}

void GqaFamilyAdapter::adjust_attention(const ModelConfig&, GqaAttentionSpec&) const {}

void GqaFamilyAdapter::adjust_decoder(const ModelConfig&, const ModelPlan&, DecoderSpec&) const {}

}  // namespace moequant::adapters
