// A family's chat format as data, for calibration conversations (JSONL "messages"): text once at
// the start, then per message the role's prefix, the content and the role's suffix. A simple,
// documented stand-in for each model's Jinja chat template, without tools or reasoning blocks;
// each family adapter gives its own (ModelAdapter::chat_template, docs/calibration.md).
#pragma once

#include <moequant/export.hpp>

#include <string>
#include <vector>

namespace moequant {

struct ChatMessage {
    std::string role;  // "system", "user" or "assistant"
    std::string content;
};

struct ChatTemplate {
    struct Turn {
        std::string prefix, suffix;
    };
    std::string begin;  // e.g. the BOS token's text
    Turn system, user, assistant;

    // The conversation as text. Error(input, "BadDataset") for a role other than the three.
    MOEQUANT_API std::string render(const std::vector<ChatMessage>& messages) const;
};

// A neutral format for families without their own: "role: content" paragraphs.
MOEQUANT_API ChatTemplate plain_chat_template();

}  // namespace moequant
