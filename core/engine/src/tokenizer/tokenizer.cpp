#include <moequant/engine/tokenizer.hpp>
#include <moequant/error.hpp>
#include <moequant/input_file.hpp>
#include <moequant/utf8.hpp>

#include "added_tokens.hpp"
#include "bpe_model.hpp"
#include "json_fields.hpp"
#include "normalizer.hpp"
#include "post_processor.hpp"
#include "pre_tokenizer.hpp"

#include <boost/json.hpp>

namespace moequant {

namespace json = boost::json;
using namespace moequant::tokenization;

struct Tokenizer::Impl {
    Impl(const json::object& file, const json::value& config)
        : added(file.contains("added_tokens") ? file.at("added_tokens") : json::value(nullptr)),
          normalizer(file.contains("normalizer") ? file.at("normalizer") : json::value(nullptr)),
          pre_tokenizer(file.contains("pre_tokenizer") ? file.at("pre_tokenizer") : json::value(nullptr)),
          model(file.contains("model") ? file.at("model") : json::value(nullptr)),
          post_processor(file.contains("post_processor") ? file.at("post_processor") : json::value(nullptr), config,
                         [this](std::string_view t) { return lookup(t); }) {}

    std::optional<std::int32_t> lookup(std::string_view token) const {
        if (auto id = added.id(token)) return id;
        return model.id(token);
    }

    AddedTokens added;
    Normalizer normalizer;
    PreTokenizer pre_tokenizer;
    BpeModel model;
    PostProcessor post_processor;
};

namespace {

json::value parse_json(std::string_view text, const std::string& source) {
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec) throw Error(ErrorKind::input, "is not valid JSON: " + ec.message(), {.file = source, .code = "BadTokenizer"});
    return v;
}

}  // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& tokenizer_json) {
    const std::filesystem::path config = tokenizer_json.parent_path() / "tokenizer_config.json";
    std::error_code ec;
    return parse(read_small_file(tokenizer_json, tokenizer_file_limit),
                 std::filesystem::exists(config, ec) ? read_small_file(config, json_file_limit) : std::string(),
                 tokenizer_json.string());
}

Tokenizer Tokenizer::parse(std::string_view tokenizer_json, std::string_view config_json, const std::string& source) {
    const json::value file = parse_json(tokenizer_json, source);
    const json::value config = config_json.empty() ? json::value(nullptr) : parse_json(config_json, source + " (tokenizer_config.json)");
    if (!file.is_object()) throw Error(ErrorKind::input, "is not a tokenizer.json object", {.file = source, .code = "BadTokenizer"});
    try {
        return Tokenizer(std::make_shared<const Impl>(file.get_object(), config));
    } catch (const Error& e) {
        throw e.with_context({.file = source});
    }
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
    if (auto bad = find_invalid_utf8(text))
        throw Error(ErrorKind::input, "the text is not valid UTF-8 (byte " + std::to_string(*bad) + ")", {.code = "BadText"});
    const Impl& t = *impl_;
    std::vector<std::int32_t> ids;
    bool first = true;
    for (const auto& raw : t.added.split(std::string(text), false)) {
        if (raw.id) {
            ids.push_back(*raw.id);
            first = false;
            continue;
        }
        const std::string normalized = t.normalizer.apply(raw.text);
        for (const auto& piece : t.added.split(normalized, true)) {
            if (piece.id) {
                ids.push_back(*piece.id);
            } else {
                for (const auto& word : t.pre_tokenizer.apply(piece.text, first)) t.model.encode_word(word, ids);
            }
            first = false;
        }
    }
    return add_special_tokens ? t.post_processor.apply(std::move(ids)) : ids;
}

std::optional<std::int32_t> Tokenizer::token_id(std::string_view token) const { return impl_->lookup(token); }

std::int64_t Tokenizer::vocab_size() const noexcept {
    return std::max(impl_->added.max_id(), impl_->model.max_id()) + 1;
}

}  // namespace moequant
