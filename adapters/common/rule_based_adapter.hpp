// A ModelAdapter driven by FamilyRules: matching and planning are shared, each family adds
// only its synthetic checkpoint.
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
    int match(const ModelConfig& config, const Checkpoint& checkpoint) const override;
    ModelPlan plan(const ModelConfig& config, const Checkpoint& checkpoint) const override;
    ChatTemplate chat_template(const ModelConfig& config) const override {
        return rules_.chat ? rules_.chat(config) : plain_chat_template();
    }

protected:
    const FamilyRules& rules() const noexcept { return rules_; }

private:
    FamilyRules rules_;
};

}  // namespace moequant::adapters
