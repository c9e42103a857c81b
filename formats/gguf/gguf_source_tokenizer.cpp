#include "gguf_source_tokenizer.hpp"

#include <moequant/error.hpp>

#include <boost/json.hpp>

#include <algorithm>
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

std::vector<float> float32s(const GgufValue& v, const std::string& file, const std::string& key) {
    if (v.type != GgufType::array || v.element != GgufType::f32 || v.bytes.size() != v.count * 4)
        bad(file, key, "is not an array of 32-bit floats");
    std::vector<float> out(v.count);
    std::memcpy(out.data(), v.bytes.data(), v.bytes.size());
    return out;
}

// The merges of a SentencePiece vocabulary as Hugging Face's converter derives them
// (SentencePieceExtractor): every split of a piece into two pieces of the vocabulary, ranked by the
// piece's score, highest first, then by the ids of the piece, its left part and its right part.
// llama.cpp's SPM tokenizer merges the adjacent pair whose concatenation scores highest, leftmost
// first: the same order, but for equal scores of different pieces.
json::array spm_merges(const std::vector<std::string>& tokens, const std::vector<float>& scores, const std::vector<std::int32_t>& types) {
    std::map<std::string_view, std::size_t> id_of;
    for (std::size_t id = 0; id < tokens.size(); ++id) id_of.emplace(tokens[id], id);
    struct Merge {
        float score;
        std::size_t piece, left, right;
    };
    std::vector<Merge> merges;
    for (std::size_t id = 0; id < tokens.size(); ++id) {
        if (types[id] != 1) continue;  // NORMAL pieces only: no byte, control or unknown token is merged into
        const std::string& piece = tokens[id];
        for (std::size_t at = 1; at < piece.size(); ++at) {
            if ((static_cast<unsigned char>(piece[at]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
            const auto left = id_of.find(std::string_view(piece).substr(0, at)), right = id_of.find(std::string_view(piece).substr(at));
            if (left != id_of.end() && right != id_of.end()) merges.push_back({scores[id], id, left->second, right->second});
        }
    }
    std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
        if (a.score != b.score) return a.score > b.score;
        if (a.piece != b.piece) return a.piece < b.piece;
        return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    json::array out;
    out.reserve(merges.size());
    for (const Merge& m : merges) out.push_back(json::array{json::string(tokens[m.left]), json::string(tokens[m.right])});
    return out;
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
    if (*model != "gpt2" && *model != "llama") {
        out.missing = "its vocabulary is llama.cpp's '" + *model + "', whose tokenizer moequant does not rebuild yet (it rebuilds gpt2 and llama ones)";
        return out;
    }
    const bool spm = *model == "llama";
    const auto regexes = pre_tokenizer_regexes().find(pre);
    if (!spm && regexes == pre_tokenizer_regexes().end()) {
        out.missing = "its pre-tokenizer is '" + pre.substr(0, 64) + "', whose regular expressions moequant does not rebuild yet (qwen2, deepseek-v3, glm4, minimax-m2)";
        return out;
    }
    const GgufValue* tokens_value = first.find("tokenizer.ggml.tokens");
    const GgufValue* merges_value = first.find("tokenizer.ggml.merges");
    const auto tokens = tokens_value ? tokens_value->as_strings() : std::nullopt;
    if (!tokens || tokens->empty()) bad(file, "tokenizer.ggml.tokens", "is missing or not a list of strings");
    const auto merges = merges_value ? merges_value->as_strings() : std::nullopt;
    if (!spm && !merges) bad(file, "tokenizer.ggml.merges", "is missing or not a list of strings (a gpt2 vocabulary needs its merges)");
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
    if (spm) {
        // SentencePiece as llama.cpp runs it: a space before each text after a special token (and
        // at the start) when add_space_prefix (its default), spaces as U+2581, the pieces merged by
        // score, a character outside the vocabulary as its <0xNN> bytes.
        const GgufValue* scores_value = first.find("tokenizer.ggml.scores");
        if (!scores_value) bad(file, "tokenizer.ggml.scores", "is missing (a llama vocabulary ranks its pieces by it)");
        const std::vector<float> scores = float32s(*scores_value, file, "tokenizer.ggml.scores");
        if (scores.size() != tokens->size()) bad(file, "tokenizer.ggml.scores", "has " + std::to_string(scores.size()) + " entries for " + std::to_string(tokens->size()) + " tokens");
        // Converted from tokenizer.json alone (the converter's LlamaHfVocab), every piece scores
        // the same: the file keeps no merge order, and llama.cpp merges leftmost-first on it.
        bool ranked = false;
        for (std::size_t id = 0; id < scores.size() && !ranked; ++id) ranked = types[id] == 1 && scores[id] != scores.front();
        if (!ranked) {
            out.missing = "its SentencePiece pieces all score the same (converted from tokenizer.json without tokenizer.model): the file keeps no merge order to rebuild";
            return out;
        }
        json::array normalizers;
        if (flag("tokenizer.ggml.add_space_prefix", true)) normalizers.push_back(json::object{{"type", "Prepend"}, {"prepend", "\u2581"}});
        normalizers.push_back(json::object{{"type", "Replace"}, {"pattern", json::object{{"String", " "}}}, {"content", "\u2581"}});
        json::object model_json{{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                                {"end_of_word_suffix", nullptr}, {"fuse_unk", true}, {"byte_fallback", true}, {"ignore_merges", false},
                                {"vocab", std::move(vocab)}, {"merges", spm_merges(*tokens, scores, types)}};
        if (auto unk = token_id("tokenizer.ggml.unknown_token_id")) model_json["unk_token"] = (*tokens)[*unk];
        json::object tokenizer{{"version", "1.0"},           {"truncation", nullptr}, {"padding", nullptr},
                               {"added_tokens", std::move(added)}, {"normalizer", json::object{{"type", "Sequence"}, {"normalizers", std::move(normalizers)}}},
                               {"pre_tokenizer", nullptr},   {"post_processor", nullptr}, {"decoder", nullptr},
                               {"model", std::move(model_json)}};
        const bool add_bos = flag("tokenizer.ggml.add_bos_token", true), add_eos = flag("tokenizer.ggml.add_eos_token", false);
        json::object config{{"tokenizer_class", "LlamaTokenizerFast"}, {"add_bos_token", add_bos}, {"add_eos_token", add_eos}};
        if (auto bos = token_id("tokenizer.ggml.bos_token_id")) config["bos_token"] = (*tokens)[*bos];
        if (auto eos = token_id("tokenizer.ggml.eos_token_id")) config["eos_token"] = (*tokens)[*eos];
        if (auto unk = token_id("tokenizer.ggml.unknown_token_id")) config["unk_token"] = (*tokens)[*unk];
        if (auto chat = text("tokenizer.chat_template")) config["chat_template"] = *chat;
        out.tokenizer_json = json::serialize(tokenizer) + "\n";
        out.tokenizer_config_json = json::serialize(config) + "\n";
        return out;
    }

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
