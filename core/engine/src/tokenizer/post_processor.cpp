#include "post_processor.hpp"

#include "json_fields.hpp"

namespace moequant::tokenization {

namespace {

// Classes whose fast tokenizer rebuilds its post-processor from add_bos_token/add_eos_token.
bool llama_style(std::string name) {
    if (name.ends_with("Fast")) name.resize(name.size() - 4);
    return name == "LlamaTokenizer" || name == "CodeLlamaTokenizer" || name == "GemmaTokenizer";
}

// A config token: a string or an AddedToken object {"content": ...}.
std::string config_token(const boost::json::object& config, const char* key) {
    const auto* v = config.if_contains(key);
    if (!v) return {};
    if (v->is_string()) return std::string(v->get_string());
    if (v->is_object()) return string_field(v->get_object(), "content", std::string("tokenizer_config ") + key);
    return {};
}

std::int32_t require(const PostProcessor::Lookup& lookup, const std::string& token, const std::string& where) {
    auto id = lookup(token);
    if (!id) bad_tokenizer(where + " names token '" + token + "', which the tokenizer does not have");
    return *id;
}

}  // namespace

PostProcessor::PostProcessor(const boost::json::value& json, const boost::json::value& config, const Lookup& lookup) {
    if (config.is_object()) {
        const auto& c = config.get_object();
        if (llama_style(string_field(c, "tokenizer_class", "tokenizer_config"))) {
            if (bool_field(c, "add_bos_token", true)) {
                const std::string bos = config_token(c, "bos_token");
                if (!bos.empty()) prefix_.push_back(require(lookup, bos, "tokenizer_config bos_token"));
            }
            if (bool_field(c, "add_eos_token", false)) {
                const std::string eos = config_token(c, "eos_token");
                if (!eos.empty()) suffix_.push_back(require(lookup, eos, "tokenizer_config eos_token"));
            }
            return;
        }
    }
    if (!json.is_null()) add(json, lookup);
}

void PostProcessor::add(const boost::json::value& json, const Lookup& lookup) {
    const std::string type = type_of(json, "post_processor");
    const auto& o = json.get_object();
    if (type == "Sequence") {
        const auto* list = o.if_contains("processors");
        if (!list || !list->is_array()) bad_tokenizer("post_processor Sequence has no 'processors' list");
        for (const auto& p : list->get_array()) add(p, lookup);
    } else if (type == "ByteLevel") {
        // offsets only
    } else if (type == "TemplateProcessing") {
        const auto* single = o.if_contains("single");
        const auto* special = o.if_contains("special_tokens");
        if (!single || !single->is_array()) bad_tokenizer("post_processor TemplateProcessing has no 'single' template");
        bool after = false;  // past the sequence
        for (const auto& item : single->get_array()) {
            const auto& piece = as_object(item, "TemplateProcessing.single[]");
            if (piece.contains("Sequence")) {
                after = true;
                continue;
            }
            const auto* token = piece.if_contains("SpecialToken");
            if (!token || !token->is_object()) bad_tokenizer("TemplateProcessing.single has an item of unknown kind");
            const std::string name = string_field(token->get_object(), "id", "TemplateProcessing SpecialToken", {}, true);
            const boost::json::value* entry = special && special->is_object() ? special->get_object().if_contains(name) : nullptr;
            std::vector<std::int32_t> ids;
            if (entry && entry->is_object() && entry->get_object().contains("ids")) {
                for (const auto& id : entry->get_object().at("ids").as_array())
                    ids.push_back(static_cast<std::int32_t>(id.to_number<std::int64_t>()));
            } else {
                ids.push_back(require(lookup, name, "post_processor TemplateProcessing"));
            }
            auto& side = after ? suffix_ : prefix_;
            side.insert(side.end(), ids.begin(), ids.end());
        }
    } else if (type == "RobertaProcessing" || type == "BertProcessing") {
        for (const char* key : {"cls", "sep"}) {
            const auto* pair = o.if_contains(key);
            if (!pair || !pair->is_array() || pair->get_array().size() != 2)
                bad_tokenizer("post_processor " + type + " has no '" + key + "' [token, id]");
            const auto id = static_cast<std::int32_t>(pair->get_array()[1].to_number<std::int64_t>());
            (std::string(key) == "cls" ? prefix_ : suffix_).push_back(id);
        }
    } else {
        bad_tokenizer("post_processor '" + type + "' is not supported");
    }
}

}  // namespace moequant::tokenization
