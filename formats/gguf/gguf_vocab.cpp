// GGUF tokenizer metadata for a BPE tokenizer, matching llama.cpp's convert_hf_to_gguf.py
// (get_vocab_base, _set_vocab_gpt2, does_token_look_special) and gguf-py's SpecialVocab
// (merges, special ids, add_*_token, chat template), reading the files instead of running
// transformers. Everything read is checked: ids are bounded before anything is sized by them.
#include "gguf_vocab.hpp"

#include "gguf_vocab_detail.hpp"

#include <moequant/error.hpp>
#include <moequant/input_file.hpp>
#include <moequant/printable.hpp>
#include <moequant/utf8.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

namespace moequant::formats {
namespace vocab_detail {

namespace {

// The special token types written, as SpecialVocab names them (tokenizer_config "<name>_token",
// config.json "<name>_token_id") and the GGUF key of each (llama.cpp spells "seperator").
struct SpecialType {
    std::string_view name, key;
};
constexpr SpecialType special_types[] = {
    {"bos", "tokenizer.ggml.bos_token_id"},       {"eos", "tokenizer.ggml.eos_token_id"},
    {"unk", "tokenizer.ggml.unknown_token_id"},   {"sep", "tokenizer.ggml.seperator_token_id"},
    {"pad", "tokenizer.ggml.padding_token_id"},
};
// Types SpecialVocab never reads from the files, which a family's converter sets by name.
constexpr SpecialType named_only_types[] = {
    {"eot", "tokenizer.ggml.eot_token_id"},
    {"eom", "tokenizer.ggml.eom_token_id"},
};

std::optional<std::string_view> special_key(std::string_view name) {
    for (const std::span<const SpecialType> table : {std::span<const SpecialType>(special_types), std::span<const SpecialType>(named_only_types)})
        for (const SpecialType& type : table)
            if (type.name == name) return type.key;
    return std::nullopt;
}

}  // namespace

[[noreturn]] void refuse(const fs::path& file, const std::string& message, const std::string& code) {
    throw Error(ErrorKind::input, message, {.file = file.string(), .code = code});
}

json::value read_json(const fs::path& file, std::uint64_t limit) {
    const std::string text = read_small_file(file, limit);
    try {
        return json::parse(text);
    } catch (const std::exception& e) {
        refuse(file, std::string("is not valid JSON: ") + e.what(), "BadJson");
    }
}

json::object read_optional_object(const fs::path& file) {
    std::error_code ec;
    if (!fs::exists(file, ec)) return {};
    json::value value = read_json(file, json_file_limit);
    if (!value.is_object()) refuse(file, "is not a JSON object", "BadJson");
    return std::move(value.as_object());
}

const json::value* member(const json::object* o, std::string_view key) { return o ? o->if_contains(key) : nullptr; }
const json::object* object_at(const json::object* o, std::string_view key) {
    const json::value* v = member(o, key);
    return v ? v->if_object() : nullptr;
}
const json::array* array_at(const json::object* o, std::string_view key) {
    const json::value* v = member(o, key);
    return v ? v->if_array() : nullptr;
}
const json::string* string_at(const json::object* o, std::string_view key) {
    const json::value* v = member(o, key);
    return v ? v->if_string() : nullptr;
}

// Python's isinstance(x, int) keeps floats out too (bools aside); saturating lets range checks refuse.
std::optional<std::int64_t> integer(const json::value* v) {
    if (!v) return std::nullopt;
    if (v->is_int64()) return v->get_int64();
    if (v->is_uint64())
        return static_cast<std::int64_t>(std::min<std::uint64_t>(v->get_uint64(), std::numeric_limits<std::int64_t>::max()));
    return std::nullopt;
}

// As SpecialVocab's `if not special_bos` style tests use it.
bool truthy(const json::value& v) {
    switch (v.kind()) {
        case json::kind::null: return false;
        case json::kind::bool_: return v.get_bool();
        case json::kind::int64: return v.get_int64() != 0;
        case json::kind::uint64: return v.get_uint64() != 0;
        case json::kind::double_: return v.get_double() != 0;
        case json::kind::string: return !v.get_string().empty();
        case json::kind::array: return !v.get_array().empty();
        case json::kind::object: return !v.get_object().empty();
    }
    return false;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t at = 0;;) {
        const std::size_t hit = text.find(from, at);
        out.append(text.substr(at, hit - at));
        if (hit == std::string_view::npos) return out;
        out.append(to);
        at = hit + from.size();
    }
}

bool looks_special(std::string_view t) {
    auto wrapped = [t](std::string_view open, std::string_view close) { return t.starts_with(open) && t.ends_with(close); };
    return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
           wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") /* <｜ ｜> */ || wrapped("<unused", ">");
}

namespace {

json::value value_or_null(const json::object& o, std::string_view key) {
    const json::value* v = o.if_contains(key);
    return v ? *v : json::value();
}

// A dict that remembers insertion order, as SpecialVocab's special_token_ids and add_special_token.
template <class T>
struct Ordered {
    std::vector<std::pair<std::string, T>> items;
    const T* find(std::string_view name) const {
        for (const auto& [n, v] : items)
            if (n == name) return &v;
        return nullptr;
    }
    void assign(std::string_view name, T value) {
        for (auto& [n, v] : items)
            if (n == name) {
                v = value;
                return;
            }
        items.emplace_back(std::string(name), value);
    }
};

struct Vocab {
    std::vector<std::string> tokens;
    std::vector<std::int32_t> types;
};

// get_vocab_base: model.vocab and added_tokens by id, padded with [PAD{i}] to the vocabulary size.
Vocab read_vocab(const fs::path& file, const json::object& model, const json::array* added_tokens,
                 const json::object& tokenizer_config, std::int64_t requested_size) {
    const std::int64_t limit = requested_size > 0 ? requested_size : gguf_max_vocab_size;
    auto id_of = [&](const json::value* v, std::string_view text) {
        const std::optional<std::int64_t> id = integer(v);
        if (!id) refuse(file, "token '" + printable_name(text) + "' has no integer id", "BadTokenId");
        if (*id < 0 || *id >= limit)
            refuse(file,
                   "token '" + printable_name(text) + "' has id " + std::to_string(*id) + ", not in [0, " +
                       std::to_string(limit) + ")" + (requested_size > 0 ? ", the vocabulary size" : ""),
                   "TokenIdOutOfRange");
        return static_cast<std::size_t>(*id);
    };
    const json::object* vocab = object_at(&model, "vocab");
    if (!vocab) refuse(file, "has no model.vocab object", "BadVocab");

    struct Entry {
        std::size_t id;
        std::string_view text;
        bool added, special;
    };
    std::vector<Entry> entries;
    entries.reserve(vocab->size() + (added_tokens ? added_tokens->size() : 0));
    for (const auto& [text, id] : *vocab) entries.push_back({id_of(&id, text), text, false, false});
    if (added_tokens)
        for (const json::value& item : *added_tokens) {
            const json::object* token = item.if_object();
            const json::string* content = string_at(token, "content");
            if (!content) refuse(file, "has an added token without a content string", "BadAddedToken");
            const json::value* special = member(token, "special");
            entries.push_back({id_of(member(token, "id"), *content), *content, true, special && truthy(*special)});
        }

    std::size_t size = static_cast<std::size_t>(requested_size);
    if (requested_size <= 0) {
        if (entries.empty()) refuse(file, "has no tokens", "BadVocab");
        size = 0;
        for (const Entry& e : entries) size = std::max(size, e.id + 1);
    }
    Vocab out{std::vector<std::string>(size), std::vector<std::int32_t>(size, 0)};
    std::vector<char> added(size, 0), special(size, 0);
    for (const Entry& e : entries) {
        // An added token may repeat a model.vocab entry (DeepSeek's <｜begin▁of▁sentence｜>), never
        // give its id another text.
        if (out.types[e.id] != 0 && out.tokens[e.id] != e.text)
            refuse(file, "token id " + std::to_string(e.id) + " is given to both '" + printable_name(out.tokens[e.id]) +
                             "' and '" + printable_name(e.text) + "'",
                   "DuplicateTokenId");
        out.tokens[e.id] = e.text;
        out.types[e.id] = token_normal;
        added[e.id] |= e.added;
        special[e.id] |= e.special;
    }
    // transformers' added_tokens_decoder also takes `special` from tokenizer_config.json.
    if (const json::object* decoder = object_at(&tokenizer_config, "added_tokens_decoder"))
        for (const auto& [key, entry] : *decoder) {
            std::size_t id = 0;
            const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
            const json::value* flag = member(entry.if_object(), "special");
            if (ec == std::errc() && end == key.data() + key.size() && id < size && flag && truthy(*flag)) special[id] = 1;
        }

    for (std::size_t i = 0; i < size; ++i) {
        if (out.types[i] == 0) {
            out.tokens[i] = "[PAD" + std::to_string(i) + "]";
            out.types[i] = token_unused;
        } else if (added[i]) {
            if (special[i] || looks_special(out.tokens[i])) {
                out.types[i] = token_control;
            } else {
                // llama.cpp takes user-defined tokens as already normalized: SentencePiece's ▁ is a space.
                out.tokens[i] = replace_all(out.tokens[i], "\xE2\x96\x81", " ");
                out.types[i] = token_user_defined;
            }
        }
    }
    return out;
}

// SpecialVocab's merges: "a b" strings as they are, or [a, b] pairs (transformers ≥ 4.45, which
// allows spaces inside a part) joined with a space after each space in a part becomes Ġ (U+0120).
std::vector<std::string> read_merges(const fs::path& file, const json::object& model) {
    const json::array* merges = array_at(&model, "merges");
    if (!merges || merges->empty()) return {};
    const bool pairs = merges->front().is_array();
    std::vector<std::string> out;
    out.reserve(merges->size());
    for (const json::value& merge : *merges) {
        const json::array* pair = merge.if_array();
        if (!pairs && merge.is_string()) {
            out.emplace_back(merge.get_string());
        } else if (pairs && pair && pair->size() == 2 && (*pair)[0].is_string() && (*pair)[1].is_string()) {
            out.push_back(replace_all((*pair)[0].get_string(), " ", "\xC4\xA0") + " " +
                          replace_all((*pair)[1].get_string(), " ", "\xC4\xA0"));
        } else {
            refuse(file, "merge " + std::to_string(out.size()) + " is neither a string nor a pair of strings like the first",
                   "BadMerges");
        }
    }
    return out;
}

// The id of a TemplateProcessing item that is a SpecialToken, when it names one.
std::optional<json::string> template_special(const json::value& item) {
    const json::string* id = string_at(object_at(item.if_object(), "SpecialToken"), "id");
    if (!id || id->empty()) return std::nullopt;
    return *id;
}

bool same(const json::value& v, const json::string& s) { return v.is_string() && v.get_string() == s; }

// SpecialVocab's crude reading of the post-processor: which special tokens encode() adds. It can
// rewrite tokenizer_config's bos/cls/eos/sep entries as the converter does.
void infer_added_specials(const json::object& tokenizer, json::object& config, Ordered<bool>& add) {
    const bool have_config = !config.empty();  // config: tokenizer_config.json
    json::value bos = value_or_null(config, "bos_token"), cls = value_or_null(config, "cls_token");
    json::value eos = value_or_null(config, "eos_token"), sep = value_or_null(config, "sep_token");
    if (!truthy(bos) && truthy(cls) && have_config) config["bos_token"] = bos = cls;
    if (!truthy(eos) && truthy(sep) && have_config) config["eos_token"] = eos = sep;

    const json::object* post = object_at(&tokenizer, "post_processor");
    if (!post || post->empty()) return;
    const json::array* listed = array_at(post, "processors");
    const json::array single_post{json::value(*post)};
    // Processor `proc`'s [value, id] entry `key`'s value, else `fallback`.
    auto first_of = [](const json::object& proc, std::string_view key, const json::value& fallback) {
        const json::array* entry = array_at(&proc, key);
        return entry && !entry->empty() ? entry->front() : fallback;
    };
    for (const json::value& item : listed ? *listed : single_post) {
        const json::object* proc = item.if_object();
        const json::string* type = string_at(proc, "type");
        if (!type) continue;
        if (*type == "RobertaProcessing") {
            add.assign("bos", true);
            add.assign("eos", true);
            if (!truthy(cls) && have_config) config["cls_token"] = cls = first_of(*proc, "cls", bos);
            if (!truthy(sep) && have_config) config["sep_token"] = sep = first_of(*proc, "sep", eos);
        } else if (*type == "TemplateProcessing") {
            const json::array* single = array_at(proc, "single");
            if (!single || single->size() < 2) continue;
            if (const auto first = template_special(single->front())) {
                if (!have_config) bos = *first;
                add.assign("bos", same(bos, *first) || same(cls, *first));
            }
            if (const auto last = template_special(single->back())) {
                // The converter makes the trailing token the EOS (keeping the old one as EOT,
                // which this writer does not emit), so add_eos is always true here.
                if (!have_config) eos = *last;
                else if (!same(eos, *last)) config["eos_token"] = eos = *last;
                add.assign("eos", true);
            }
        }
    }
}

// The chat template SpecialVocab finds: tokenizer_config's chat_template (a string, or named
// templates of which "default" is tokenizer.chat_template), else chat_template.jinja, else
// chat_template.json's.
std::optional<std::string> read_chat_template(const fs::path& dir, const json::object& config) {
    json::value fallback;
    const fs::path jinja = dir / "chat_template.jinja", json_file = dir / "chat_template.json";
    std::error_code ec;
    if (fs::exists(jinja, ec)) {
        std::string text = read_small_file(jinja, json_file_limit);
        if (find_invalid_utf8(text)) refuse(jinja, "is not valid UTF-8", "BadChatTemplate");
        fallback = json::string(text);
    } else if (fs::exists(json_file, ec)) {
        const json::value v = read_json(json_file, json_file_limit);
        if (const json::value* t = member(v.if_object(), "chat_template")) fallback = *t;
    }
    const json::value* chosen = config.contains("chat_template") ? config.if_contains("chat_template") : &fallback;
    if (const json::string* s = chosen->if_string()) return std::string(*s);
    std::optional<std::string> named_default;
    if (const json::array* named = chosen->if_array())
        for (const json::value& choice : *named) {
            const json::string* name = string_at(choice.if_object(), "name");
            const json::string* text = string_at(choice.if_object(), "template");
            if (name && text && *name == "default") named_default = std::string(*text);
        }
    return named_default;
}

}  // namespace

std::vector<GgufKeyValue> special_vocab_keys(const fs::path& model_dir, const json::object* tokenizer, std::size_t n_vocab,
                                             const std::vector<std::pair<std::string, std::string>>& named) {
    const fs::path tokenizer_file = model_dir / "tokenizer.json", config_file = model_dir / "config.json";
    const json::value* added_value = member(tokenizer, "added_tokens");
    const json::array* added_tokens = added_value ? added_value->if_array() : nullptr;
    json::object tokenizer_config = read_optional_object(model_dir / "tokenizer_config.json");

    Ordered<bool> add;
    Ordered<std::uint32_t> special_ids;
    // SpecialVocab._set_special_token: the first id found for a type wins; a non-integer is
    // ignored, a negative one refused; one past the vocabulary is left out (llama.cpp would ignore it).
    auto set_special = [&](std::string_view name, const json::value* value, const fs::path& file) {
        const std::optional<std::int64_t> id = integer(value);
        if (!id || special_ids.find(name)) return;
        if (*id < 0) refuse(file, std::string(name) + " token id " + std::to_string(*id) + " is negative", "BadSpecialTokenId");
        if (*id < static_cast<std::int64_t>(n_vocab)) special_ids.assign(name, static_cast<std::uint32_t>(*id));
    };

    if (tokenizer) infer_added_specials(*tokenizer, tokenizer_config, add);
    std::optional<std::string> chat_template;
    if (!tokenizer_config.empty()) {
        chat_template = read_chat_template(model_dir, tokenizer_config);
        for (const SpecialType& type : special_types) {
            const std::string name(type.name);
            if (const json::value* flag = tokenizer_config.if_contains("add_" + name + "_token"); flag && flag->is_bool())
                add.assign(name, flag->get_bool());
            const json::value* entry = tokenizer_config.if_contains(name + "_token");
            const json::string* content = entry ? entry->if_string() : nullptr;
            if (!content) content = string_at(entry ? entry->if_object() : nullptr, "content");
            if (!content || !added_tokens) continue;
            // Matched against added_tokens only, the first one with this content.
            for (const json::value& item : *added_tokens)
                if (const json::object* token = item.if_object(); token && same(value_or_null(*token, "content"), *content)) {
                    set_special(name, member(token, "id"), tokenizer_file);
                    break;
                }
        }
    }
    const json::object config = read_optional_object(config_file);
    const json::object* text_config = object_at(&config, "text_config");
    for (const SpecialType& type : special_types) {
        const std::string key = std::string(type.name) + "_token_id";
        const json::value* id = config.if_contains(key);
        if ((!id || id->is_null()) && text_config) id = text_config->if_contains(key);
        set_special(type.name, id, config_file);
    }

    // The family's own: get_added_vocab()[content], where the type is still unset.
    for (const auto& [name, content] : named) {
        if (!special_key(name)) throw Error(ErrorKind::internal, "no GGUF key for special token type " + name);
        if (!added_tokens) continue;
        const json::string wanted(content);
        for (const json::value& item : *added_tokens)
            if (const json::object* token = item.if_object(); token && same(value_or_null(*token, "content"), wanted)) {
                set_special(name, member(token, "id"), tokenizer_file);
                break;
            }
    }

    std::vector<GgufKeyValue> out;
    for (const auto& [name, id] : special_ids.items) out.push_back({std::string(*special_key(name)), GgufValue::u32(id)});
    for (const auto& [name, value] : add.items)
        if (name == "bos" || name == "eos") out.push_back({"tokenizer.ggml.add_" + name + "_token", GgufValue::boolean(value)});
    if (chat_template) out.push_back({"tokenizer.chat_template", GgufValue::string(*chat_template)});
    return out;
}

}  // namespace vocab_detail

std::vector<GgufKeyValue> gguf_bpe_vocab(const std::filesystem::path& model_dir, const GgufVocabRequest& request) {
    using namespace vocab_detail;
    const fs::path tokenizer_file = model_dir / "tokenizer.json", config_file = model_dir / "config.json";
    if (request.vocab_size < 0 || request.vocab_size > gguf_max_vocab_size)
        refuse(config_file, "vocab_size " + std::to_string(request.vocab_size) + " is not in [0, " +
                                std::to_string(gguf_max_vocab_size) + "]",
               "BadVocabSize");

    const json::value tokenizer_value = read_json(tokenizer_file, tokenizer_file_limit);
    const json::object* tokenizer = tokenizer_value.if_object();
    if (!tokenizer) refuse(tokenizer_file, "is not a JSON object", "BadJson");
    const json::object* model = object_at(tokenizer, "model");
    const json::string* model_type = string_at(model, "type");
    if (!model_type || *model_type != "BPE")
        refuse(tokenizer_file,
               "holds a " + (model_type ? printable_name(*model_type) : std::string("typeless")) +
                   " tokenizer model; llama.cpp's gpt2 vocabulary needs BPE",
               "NotBpe");
    const json::value* added_value = member(tokenizer, "added_tokens");
    const json::array* added_tokens = added_value ? added_value->if_array() : nullptr;
    if (added_value && !added_tokens && !added_value->is_null())
        refuse(tokenizer_file, "has added_tokens that is not a list", "BadAddedToken");

    const json::object tokenizer_config = read_optional_object(model_dir / "tokenizer_config.json");
    const Vocab vocab = read_vocab(tokenizer_file, *model, added_tokens, tokenizer_config, request.vocab_size);
    const std::vector<std::string> merges = read_merges(tokenizer_file, *model);

    std::vector<GgufKeyValue> out;
    out.push_back({"tokenizer.ggml.model", GgufValue::string("gpt2")});
    out.push_back({"tokenizer.ggml.pre", GgufValue::string(request.pre)});
    out.push_back({"tokenizer.ggml.tokens", GgufValue::strings(vocab.tokens)});
    out.push_back({"tokenizer.ggml.token_type", GgufValue::i32s(vocab.types)});
    if (!merges.empty()) out.push_back({"tokenizer.ggml.merges", GgufValue::strings(merges)});
    for (auto& kv : special_vocab_keys(model_dir, tokenizer, vocab.tokens.size(), request.named_specials)) out.push_back(std::move(kv));
    return out;
}

}  // namespace moequant::formats
