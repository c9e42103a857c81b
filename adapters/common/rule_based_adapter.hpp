// A ModelAdapter driven by FamilyRules: matching and planning are shared, each family adds
// its synthetic checkpoint and what its rules cannot say.
#pragma once

#include "family_rules.hpp"

#include <moequant/model_adapter.hpp>

namespace moequant::adapters {

class RuleBasedAdapter : public ModelAdapter {
public:
    explicit RuleBasedAdapter(FamilyRules rules) : rules_(std::move(rules)) {}

    std::string_view id() const override { return rules_.id; }
    std::string_view description() const override { return rules_.description; }
    std::vector<std::string> model_types() const override { return rules_.model_types; }
    std::vector<SynthRelease> synth_releases() const override { return rules_.releases; }
    int match(const ModelConfig& config, const Checkpoint& checkpoint) const override;
    ModelPlan plan(const ModelConfig& config, const Checkpoint& checkpoint) const override;
    ChatTemplate chat_template(const ModelConfig& config) const override {
        return rules_.chat ? rules_.chat(config) : plain_chat_template();
    }
    std::unique_ptr<DecoderForward> decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                    const ModelPlan& plan) const override;

protected:
    const FamilyRules& rules() const noexcept { return rules_; }
    // The family's own plan warnings, after the shared ones; the default adds none.
    virtual void add_warnings(const ModelConfig& config, ModelPlan& plan) const;

private:
    FamilyRules rules_;
};

}  // namespace moequant::adapters
