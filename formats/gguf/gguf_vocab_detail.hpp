// What the gpt2 (gguf_vocab.cpp) and llama (gguf_llama_vocab.cpp) tokenizer writers share: the
// checked JSON reading, gguf-py's token types, does_token_look_special, and SpecialVocab (the
// special token ids, add_bos/add_eos, the chat template).
#pragma once

#include "gguf_container.hpp"

#include <boost/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moequant::formats::vocab_detail {

namespace fs = std::filesystem;
namespace json = boost::json;

// gguf-py's TokenType.
constexpr std::int32_t token_normal = 1, token_unknown = 2, token_control = 3, token_user_defined = 4, token_unused = 5,
                       token_byte = 6;

// Error(input) naming `file`, with `code`.
[[noreturn]] void refuse(const fs::path& file, const std::string& message, const std::string& code);
json::value read_json(const fs::path& file, std::uint64_t limit);
// A side file the converter reads only when it is there: its object, or an empty one.
json::object read_optional_object(const fs::path& file);

const json::value* member(const json::object* o, std::string_view key);
const json::object* object_at(const json::object* o, std::string_view key);
const json::array* array_at(const json::object* o, std::string_view key);
const json::string* string_at(const json::object* o, std::string_view key);
// An integer value (never a bool or a float); a uint64 past int64 saturates.
std::optional<std::int64_t> integer(const json::value* v);
// Python truthiness.
bool truthy(const json::value& v);
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);
// does_token_look_special: added tokens some models leave unmarked that are control tokens.
bool looks_special(std::string_view t);

// SpecialVocab(model_dir, load_merges=False, n_vocab).add_to_gguf: the special token ids found in
// tokenizer_config.json (matched against `tokenizer`'s added_tokens, when there is a
// tokenizer.json) then config.json, add_bos/add_eos, and the chat template.
// `named` ({type, content}) are then set from the added tokens by their text, where still unset
// (the family's own _set_special_token calls; types bos, eos, unk, sep, pad, eot, eom).
std::vector<GgufKeyValue> special_vocab_keys(const fs::path& model_dir, const json::object* tokenizer, std::size_t n_vocab,
                                             const std::vector<std::pair<std::string, std::string>>& named = {});

}  // namespace moequant::formats::vocab_detail
