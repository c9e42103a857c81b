// llama.cpp's "llama" (SentencePiece) vocabulary as convert_hf_to_gguf.py's LlamaModel.set_vocab
// writes it: from tokenizer.model when the folder has one (_create_vocab_sentencepiece), else
// from a byte-fallback BPE tokenizer.json (_set_vocab_llama_hf, gguf-py's LlamaHfVocab), then
// SpecialVocab without merges and tokenizer_config's add_prefix_space.
#include "gguf_spm_model.hpp"
#include "gguf_vocab.hpp"
#include "gguf_vocab_detail.hpp"

#include <moequant/input_file.hpp>
#include <moequant/printable.hpp>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

namespace moequant::formats {
namespace {

using namespace vocab_detail;

struct LlamaVocab {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<std::int32_t> types;
};

// An id as Python's int() of a JSON key or value would read it; nullopt for anything else.
std::optional<std::int64_t> id_of_key(std::string_view key) {
    std::int64_t id = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size()) return std::nullopt;
    return id;
}

// _create_vocab_sentencepiece: vocab_size slots of [PAD{i}] (score -10000, UNUSED), the pieces
// over them (USER_DEFINED pieces count as NORMAL), then added_tokens.json and tokenizer_config's
// added_tokens_decoder over those (score -1000).
LlamaVocab spm_vocab(const fs::path& dir, std::int64_t vocab_size) {
    const fs::path model_file = dir / "tokenizer.model", config_file = dir / "config.json";
    const std::vector<SpmPiece> pieces = read_spm_model(model_file, static_cast<std::size_t>(gguf_max_vocab_size));
    const auto size = static_cast<std::size_t>(vocab_size > 0 ? vocab_size : static_cast<std::int64_t>(pieces.size()));
    if (pieces.size() > size)
        refuse(config_file, "vocab_size " + std::to_string(size) + " is smaller than tokenizer.model's " + std::to_string(pieces.size()) + " pieces",
               "TokenIdOutOfRange");
    LlamaVocab out{{}, std::vector<float>(size, -10000.0f), std::vector<std::int32_t>(size, token_unused)};
    out.tokens.reserve(size);
    for (std::size_t i = 0; i < size; ++i) out.tokens.push_back("[PAD" + std::to_string(i) + "]");
    for (std::size_t id = 0; id < pieces.size(); ++id) {
        const SpmPiece& p = pieces[id];
        out.tokens[id] = p.piece;
        out.scores[id] = p.score;
        switch (p.type) {
            case SpmPieceType::unknown: out.types[id] = token_unknown; break;
            case SpmPieceType::control: out.types[id] = token_control; break;
            case SpmPieceType::unused: out.types[id] = token_unused; break;
            case SpmPieceType::byte: out.types[id] = token_byte; break;
            default: out.types[id] = token_normal; break;
        }
    }

    const fs::path added_file = dir / "added_tokens.json";
    for (const auto& [text, value] : read_optional_object(added_file)) {
        const std::optional<std::int64_t> id = integer(&value);
        if (!id || *id < 0) refuse(added_file, "gives '" + printable_name(text) + "' no id in [0, vocab_size)", "BadTokenId");
        if (*id >= static_cast<std::int64_t>(size)) continue;  // the converter warns and leaves it out
        out.tokens[static_cast<std::size_t>(*id)] = std::string(text);
        out.scores[static_cast<std::size_t>(*id)] = -1000.0f;
        out.types[static_cast<std::size_t>(*id)] = token_user_defined;
    }

    const fs::path config_json = dir / "tokenizer_config.json";
    const json::object tokenizer_config = read_optional_object(config_json);
    if (const json::value* decoder_value = tokenizer_config.if_contains("added_tokens_decoder")) {
        const json::object* decoder = decoder_value->if_object();
        if (!decoder) refuse(config_json, "has added_tokens_decoder that is not an object", "BadAddedToken");
        for (const auto& [key, entry] : *decoder) {
            const std::optional<std::int64_t> id = id_of_key(key);
            const json::string* content = string_at(entry.if_object(), "content");
            if (!id || *id < 0 || *id >= static_cast<std::int64_t>(size) || !content)
                refuse(config_json, "added_tokens_decoder entry '" + printable_name(key) + "' is no token id in [0, " + std::to_string(size) +
                                        ") with a content string",
                       "BadAddedToken");
            const auto i = static_cast<std::size_t>(*id);
            const json::value* special = member(entry.if_object(), "special");
            if ((special && truthy(*special)) || looks_special(*content)) {
                out.tokens[i] = std::string(*content);
                out.types[i] = token_control;
            } else {
                out.tokens[i] = replace_all(*content, "\xE2\x96\x81", " ");  // user-defined spaces pre-normalized
                out.types[i] = token_user_defined;
            }
            out.scores[i] = -1000.0f;
        }
    }
    return out;
}

// transformers' special tokens of a Llama tokenizer: LlamaTokenizerFast's defaults (<unk>, <s>,
// </s>), then tokenizer_config.json's, then special_tokens_map.json's; a name may be null.
std::set<std::string> special_token_texts(const fs::path& dir, const json::object& tokenizer_config) {
    std::map<std::string, std::vector<std::string>> named;
    const json::string* cls = string_at(&tokenizer_config, "tokenizer_class");
    if (!cls || *cls == "LlamaTokenizer" || *cls == "LlamaTokenizerFast")
        named = {{"unk_token", {"<unk>"}}, {"bos_token", {"<s>"}}, {"eos_token", {"</s>"}}};
    auto content = [](const json::value& v) -> std::optional<std::string> {
        if (const json::string* s = v.if_string()) return std::string(*s);
        if (const json::string* s = string_at(v.if_object(), "content")) return std::string(*s);
        return std::nullopt;
    };
    auto take = [&](const json::object& from) {
        for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
            if (const json::value* v = from.if_contains(name)) {
                const auto text = content(*v);
                named[name] = text ? std::vector<std::string>{*text} : std::vector<std::string>{};
            }
        if (const json::array* extra = array_at(&from, "additional_special_tokens")) {
            auto& list = named["additional_special_tokens"];
            list.clear();
            for (const json::value& v : *extra)
                if (const auto text = content(v)) list.push_back(*text);
        }
    };
    take(tokenizer_config);
    take(read_optional_object(dir / "special_tokens_map.json"));
    std::set<std::string> out;
    for (const auto& [name, texts] : named) out.insert(texts.begin(), texts.end());
    return out;
}

// <0xNN>: a byte-fallback token (LlamaHfVocab's BYTE).
bool is_byte_token(std::string_view t) {
    auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
    return t.size() == 6 && t.starts_with("<0x") && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

// LlamaHfVocab: model.vocab's ids 0..n-1 (score -1000; BYTE for <0xNN>, CONTROL for the special
// tokens, NORMAL otherwise), then the added tokens past them in id order (CONTROL when special,
// else USER_DEFINED). Nothing is padded.
LlamaVocab llama_hf_vocab(const fs::path& dir, const json::object& tokenizer) {
    const fs::path file = dir / "tokenizer.json";
    const json::object* model = object_at(&tokenizer, "model");
    const json::string* type = string_at(model, "type");
    const json::value* fallback = member(model, "byte_fallback");
    const json::string* decoder = string_at(object_at(&tokenizer, "decoder"), "type");
    if (!type || *type != "BPE" || !fallback || !truthy(*fallback) || !decoder || *decoder != "Sequence")
        refuse(file,
               "is no byte-fallback BPE with a Sequence decoder and the folder has no tokenizer.model: llama.cpp's converter "
               "would not write a llama vocabulary from it",
               "NotLlamaVocab");
    const json::object* vocab = object_at(model, "vocab");
    if (!vocab || vocab->empty()) refuse(file, "has no model.vocab object", "BadVocab");
    if (static_cast<std::int64_t>(vocab->size()) > gguf_max_vocab_size) refuse(file, "has more tokens than GGUF output takes", "BadVocab");

    const std::size_t base = vocab->size();
    LlamaVocab out{std::vector<std::string>(base), std::vector<float>(base, -1000.0f), std::vector<std::int32_t>(base, 0)};
    std::map<std::string_view, std::size_t> ids;  // text -> id, model.vocab and added tokens
    for (const auto& [text, value] : *vocab) {
        const std::optional<std::int64_t> id = integer(&value);
        if (!id || *id < 0 || *id >= static_cast<std::int64_t>(base) || out.types[static_cast<std::size_t>(*id)])
            refuse(file, "token '" + printable_name(text) + "' has no id of its own in [0, " + std::to_string(base) + "), the vocabulary's size",
                   "TokenIdOutOfRange");
        out.tokens[static_cast<std::size_t>(*id)] = std::string(text);
        out.types[static_cast<std::size_t>(*id)] = token_normal;
        ids.emplace(text, static_cast<std::size_t>(*id));
    }

    // Added tokens: those over model.vocab must repeat its entry; the others follow it, in id order.
    std::map<std::int64_t, std::string_view> extra;
    const json::value* added_value = member(&tokenizer, "added_tokens");
    const json::array* added = added_value ? added_value->if_array() : nullptr;
    if (added_value && !added && !added_value->is_null()) refuse(file, "has added_tokens that is not a list", "BadAddedToken");
    if (added)
        for (const json::value& item : *added) {
            const json::string* content = string_at(item.if_object(), "content");
            const std::optional<std::int64_t> id = integer(member(item.if_object(), "id"));
            if (!content || !id || *id < 0 || *id >= gguf_max_vocab_size)
                refuse(file, "has an added token without a content string and an id in range", "BadAddedToken");
            const auto known = ids.find(*content);
            if (*id < static_cast<std::int64_t>(base) ? out.tokens[static_cast<std::size_t>(*id)] != *content
                                                       : known != ids.end() || extra.count(*id))
                refuse(file, "added token '" + printable_name(*content) + "' (id " + std::to_string(*id) + ") gives an id or a text a second meaning",
                       "DuplicateTokenId");
            if (*id >= static_cast<std::int64_t>(base)) {
                extra.emplace(*id, *content);
                ids.emplace(*content, static_cast<std::size_t>(*id));
            }
        }

    const std::set<std::string> specials = special_token_texts(dir, read_optional_object(dir / "tokenizer_config.json"));
    std::set<std::size_t> special_ids;
    for (const std::string& text : specials) {
        const auto it = ids.find(text);
        if (it == ids.end())
            refuse(file, "has no token '" + printable_name(text) + "', which the tokenizer names special (transformers would add it)",
                   "MissingSpecialToken");
        special_ids.insert(it->second);
    }
    for (std::size_t id = 0; id < base; ++id)
        out.types[id] = is_byte_token(out.tokens[id]) ? token_byte : special_ids.count(id) ? token_control : token_normal;
    for (const auto& [id, text] : extra) {
        // The GGUF numbers them by position: a gap would shift every later id.
        if (id != static_cast<std::int64_t>(out.tokens.size()))
            refuse(file, "added token '" + printable_name(text) + "' has id " + std::to_string(id) + " where " + std::to_string(out.tokens.size()) +
                             " comes next: llama.cpp would number it otherwise",
                   "TokenIdOutOfRange");
        out.tokens.emplace_back(text);
        out.scores.push_back(-1000.0f);
        out.types.push_back(specials.count(std::string(text)) ? token_control : token_user_defined);
    }
    return out;
}

}  // namespace

std::vector<GgufKeyValue> gguf_llama_vocab(const std::filesystem::path& model_dir, const GgufVocabRequest& request) {
    const fs::path config_file = model_dir / "config.json", tokenizer_file = model_dir / "tokenizer.json";
    if (request.vocab_size < 0 || request.vocab_size > gguf_max_vocab_size)
        refuse(config_file, "vocab_size " + std::to_string(request.vocab_size) + " is not in [0, " + std::to_string(gguf_max_vocab_size) + "]",
               "BadVocabSize");
    std::error_code ec;
    json::value tokenizer_value;
    if (fs::exists(tokenizer_file, ec)) {
        tokenizer_value = read_json(tokenizer_file, tokenizer_file_limit);
        if (!tokenizer_value.is_object()) refuse(tokenizer_file, "is not a JSON object", "BadJson");
    }
    const json::object* tokenizer = tokenizer_value.if_object();

    LlamaVocab vocab;
    if (fs::exists(model_dir / "tokenizer.model", ec)) {
        vocab = spm_vocab(model_dir, request.vocab_size);
    } else {
        if (!tokenizer) refuse(model_dir / "tokenizer.model", "is missing, and so is tokenizer.json", "NoTokenizer");
        vocab = llama_hf_vocab(model_dir, *tokenizer);
        // The converter writes the tokenizer's own count; llama.cpp sizes token_embd by it.
        if (request.vocab_size > 0 && static_cast<std::int64_t>(vocab.tokens.size()) != request.vocab_size)
            refuse(config_file,
                   "vocab_size " + std::to_string(request.vocab_size) + " is not tokenizer.json's " + std::to_string(vocab.tokens.size()) +
                       " tokens: llama.cpp would refuse token_embd's shape",
                   "VocabSizeMismatch");
    }

    std::vector<GgufKeyValue> out;
    out.push_back({"tokenizer.ggml.model", GgufValue::string("llama")});
    out.push_back({"tokenizer.ggml.pre", GgufValue::string(request.pre)});
    out.push_back({"tokenizer.ggml.tokens", GgufValue::strings(vocab.tokens)});
    out.push_back({"tokenizer.ggml.scores", GgufValue::f32s(vocab.scores)});
    out.push_back({"tokenizer.ggml.token_type", GgufValue::i32s(vocab.types)});
    for (auto& kv : special_vocab_keys(model_dir, tokenizer, vocab.tokens.size())) out.push_back(std::move(kv));
    const fs::path config_json = model_dir / "tokenizer_config.json";
    const json::object config = read_optional_object(config_json);  // if_contains() points into it
    if (const json::value* prefix = config.if_contains("add_prefix_space")) {
        if (!prefix->is_bool()) refuse(config_json, "has add_prefix_space that is not true or false", "BadTokenizerConfig");
        out.push_back({"tokenizer.ggml.add_space_prefix", GgufValue::boolean(prefix->get_bool())});
    }
    return out;
}

}  // namespace moequant::formats
