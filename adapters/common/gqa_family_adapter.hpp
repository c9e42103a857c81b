// A rule-driven family whose calibration forward is the shared GQA decoder (gqa_decoder.hpp):
// the attention and decoder are read from the config, and the family adjusts what its config
// says differently (Mixtral needs nothing, Qwen3-MoE q/k norms, GLM-4.5 biases, partial rotary
// and shared experts, MiniMax-M2 whole-projection norms).
#pragma once

#include "gqa_decoder.hpp"
#include "rule_based_adapter.hpp"

namespace moequant::adapters {

class GqaFamilyAdapter : public RuleBasedAdapter {
public:
    using RuleBasedAdapter::RuleBasedAdapter;

    std::unique_ptr<DecoderForward> decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                    const ModelPlan& plan) const final;

protected:
    // The family's attention beyond gqa_attention_from_config(); the default changes nothing.
    virtual void adjust_attention(const ModelConfig& config, GqaAttentionSpec& attention) const;
    // The family's decoder beyond decoder_spec_from_config(); the default changes nothing.
    virtual void adjust_decoder(const ModelConfig& config, const ModelPlan& plan, DecoderSpec& decoder) const;
};

}  // namespace moequant::adapters
