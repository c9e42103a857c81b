#include <moequant/chat_template.hpp>
#include <moequant/error.hpp>

namespace moequant {

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
    std::string text = begin;
    for (const auto& m : messages) {
        const Turn* turn = m.role == "system" ? &system : m.role == "user" ? &user : m.role == "assistant" ? &assistant : nullptr;
        if (!turn)
            throw Error(ErrorKind::input, "message role '" + m.role + "' is not system, user or assistant", {.code = "BadDataset"});
        text += turn->prefix + m.content + turn->suffix;
    }
    return text;
}

ChatTemplate plain_chat_template() {
    ChatTemplate t;
    t.system = {"System: ", "\n\n"};
    t.user = {"User: ", "\n\n"};
    t.assistant = {"Assistant: ", "\n\n"};
    return t;
}

}  // namespace moequant
