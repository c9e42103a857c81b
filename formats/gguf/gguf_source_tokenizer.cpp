#include "gguf_source_tokenizer.hpp"

#include <moequant/error.hpp>

#include <boost/json.hpp>

#include <cstring>
#include <map>
#include <vector>

namespace moequant::formats {
namespace {

namespace json = boost::json;

// llama.cpp's token types (llama_token_type).
constexpr std::int32_t type_control = 3, type_user_defined = 4;

// The regular expressions llama.cpp splits a gpt2 vocabulary's text with, per pre-tokenizer
// (llama_vocab::impl::load, src/llama-vocab.cpp), as Hugging Face's tokenizer.json spells them.
const std::map<std::string, std::vector<std::string>>& pre_tokenizer_regexes() {
    static const std::map<std::string, std::vector<std::string>> regexes = {
        {"qwen2",
         {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
        {"glm4",  // llama.cpp's CHATGLM4: Llama-3's expression
         {R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
        {"minimax-m2",  // llama.cpp's GPT4O / MINIMAX_M2: o200k's expression with its letter classes as lookaheads
         {R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
        {"deepseek-v3",
         {R"re(\p{N}{1,3})re", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
          R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
    };
    return regexes;
}

[[noreturn]] void bad(const std::string& file, const std::string& key, const std::string& why) {
    throw Error(ErrorKind::input, "GGUF key " + key + " " + why, {.file = file, .code = "BadGgufKey"});
}

std::vector<std::int32_t> int32s(const GgufValue& v, const std::string& file, const std::string& key) {
    if (v.type != GgufType::array || (v.element != GgufType::i32 && v.element != GgufType::u32) || v.bytes.size() != v.count * 4)
        bad(file, key, "is not an array of 32-bit integers");
    std::vector<std::int32_t> out(v.count);
    std::memcpy(out.data(), v.bytes.data(), v.bytes.size());
    return out;
}

json::object byte_level() {
    return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
}

}  // namespace

GgufSourceTokenizer gguf_source_tokenizer(const GgufFile& first, const std::string& file) {
    GgufSourceTokenizer out;
    auto text = [&](const char* key) -> std::optional<std::string> {
        const GgufValue* v = first.find(key);
        return v ? v->as_string() : std::nullopt;
    };
    const auto model = text("tokenizer.ggml.model");
    const auto pre = text("tokenizer.ggml.pre").value_or("default");
    if (!model) {
        out.missing = "the GGUF has no tokenizer.ggml.model";
        return out;
    }
    if (*model != "gpt2") {
        out.missing = "its vocabulary is llama.cpp's '" + *model + "', whose tokenizer moequant does not rebuild yet (it rebuilds gpt2 ones)";
        return out;
    }
    const auto regexes = pre_tokenizer_regexes().find(pre);
    if (regexes == pre_tokenizer_regexes().end()) {
        out.missing = "its pre-tokenizer is '" + pre.substr(0, 64) + "', whose regular expressions moequant does not rebuild yet (qwen2, deepseek-v3, glm4, minimax-m2)";
        return out;
    }
    const GgufValue* tokens_value = first.find("tokenizer.ggml.tokens");
    const GgufValue* merges_value = first.find("tokenizer.ggml.merges");
    const auto tokens = tokens_value ? tokens_value->as_strings() : std::nullopt;
    if (!tokens || tokens->empty()) bad(file, "tokenizer.ggml.tokens", "is missing or not a list of strings");
    const auto merges = merges_value ? merges_value->as_strings() : std::nullopt;
    if (!merges) bad(file, "tokenizer.ggml.merges", "is missing or not a list of strings (a gpt2 vocabulary needs its merges)");
    std::vector<std::int32_t> types(tokens->size(), 1);
    if (const GgufValue* v = first.find("tokenizer.ggml.token_type")) {
        types = int32s(*v, file, "tokenizer.ggml.token_type");
        if (types.size() != tokens->size()) bad(file, "tokenizer.ggml.token_type", "has " + std::to_string(types.size()) + " entries for " + std::to_string(tokens->size()) + " tokens");
    }
    auto token_id = [&](const char* key) -> std::optional<std::size_t> {
        const GgufValue* v = first.find(key);
        if (!v) return std::nullopt;
        const auto id = v->as_unsigned();
        if (!id || *id >= tokens->size()) bad(file, key, "is not a token id of the vocabulary");
        return static_cast<std::size_t>(*id);
    };
    auto flag = [&](const char* key, bool fallback) {
        const GgufValue* v = first.find(key);
        return v && v->as_bool() ? *v->as_bool() : fallback;
    };

    json::object vocab;
    json::array added;
    for (std::size_t id = 0; id < tokens->size(); ++id) {
        vocab[(*tokens)[id]] = id;
        if (types[id] == type_control || types[id] == type_user_defined)
            added.push_back(json::object{{"id", id}, {"content", (*tokens)[id]}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                                         {"normalized", types[id] == type_user_defined}, {"special", types[id] == type_control}});
    }
    if (vocab.size() != tokens->size()) bad(file, "tokenizer.ggml.tokens", "holds a token twice");
    json::array merge_list;
    for (const std::string& m : *merges) merge_list.push_back(json::string(m));
    json::array splits;
    for (const std::string& regex : regexes->second)
        splits.push_back(json::object{{"type", "Split"}, {"pattern", json::object{{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}});
    splits.push_back(byte_level());

    json::object tokenizer{{"version", "1.0"},
                           {"truncation", nullptr},
                           {"padding", nullptr},
                           {"added_tokens", std::move(added)},
                           {"normalizer", nullptr},  // llama.cpp normalizes nothing
                           {"pre_tokenizer", json::object{{"type", "Sequence"}, {"pretokenizers", std::move(splits)}}},
                           {"post_processor", byte_level()},
                           {"decoder", byte_level()},
                           {"model", json::object{{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                                                  {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                                                  {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                                                  {"vocab", std::move(vocab)}, {"merges", std::move(merge_list)}}}};
    // llama.cpp adds BOS / EOS as add_bos_token / add_eos_token say; the fast tokenizer of that
    // class does too (the post-processor it rebuilds from them).
    const bool add_bos = flag("tokenizer.ggml.add_bos_token", false), add_eos = flag("tokenizer.ggml.add_eos_token", false);
    json::object config{{"tokenizer_class", add_bos || add_eos ? "LlamaTokenizerFast" : "PreTrainedTokenizerFast"},
                        {"add_bos_token", add_bos},
                        {"add_eos_token", add_eos}};
    if (auto bos = token_id("tokenizer.ggml.bos_token_id")) config["bos_token"] = (*tokens)[*bos];
    if (auto eos = token_id("tokenizer.ggml.eos_token_id")) config["eos_token"] = (*tokens)[*eos];
    if (auto pad = token_id("tokenizer.ggml.padding_token_id")) config["pad_token"] = (*tokens)[*pad];
    if (auto chat = text("tokenizer.chat_template")) config["chat_template"] = *chat;
    out.tokenizer_json = json::serialize(tokenizer) + "\n";
    out.tokenizer_config_json = json::serialize(config) + "\n";
    return out;
}

}  // namespace moequant::formats
