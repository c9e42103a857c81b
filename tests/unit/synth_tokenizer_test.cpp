// Synthetic tokenizers (adapters/common/synth/synth_tokenizer.hpp): the generated files are checked
// as a tokenizers library would read them (dense ids, loadable merges, the right components),
// and a textbook BPE encoder written here encodes and decodes text losslessly with them.
#include "synth/synth_tokenizer.hpp"

#include <moequant/engine/tokenizer.hpp>
#include <moequant/error.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using moequant::adapters::embedded_text;
using moequant::adapters::make_synth_tokenizer;
using moequant::adapters::SynthTokenizer;
using moequant::adapters::TokenizerRequest;
using moequant::adapters::TokenizerStyle;
namespace json = boost::json;

const std::string metaspace = "\xE2\x96\x81";  // "▁"

// Strings the encoders must round-trip: ASCII, accents, CJK (with characters absent from the
// training text), emoji, digits, contractions, line breaks and runs of spaces.
const std::vector<std::string> samples = {
    "Hello world",
    "The gatekeeper's ledger: 2,048 questions at 06:45!",
    "Ça fait déjà 3 fois qu'on goûte la brioche, n'est-ce pas ?",
    "Grüße aus Süddeutschland: Straße, Brücke, Öl.",
    "专家们各有所长。机器学习很有趣！",
    "Emoji: 🌊🚀🙂 and more",
    "  leading spaces\n\ttabs and\r\nnew lines  \n\n",
    "We're sure they'll say it's fine; I'd think you've done it.",
    "x",
};

TokenizerRequest byte_level_request(std::int64_t vocab_size) {
    TokenizerRequest request;
    request.style = TokenizerStyle::byte_level_bpe;
    request.vocab_size = vocab_size;
    request.special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    request.eos_token = "<|im_end|>";
    request.chat_template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}";
    return request;
}

TokenizerRequest sentencepiece_request(std::int64_t vocab_size) {
    TokenizerRequest request;
    request.style = TokenizerStyle::sentencepiece_bpe;
    request.vocab_size = vocab_size;
    request.special_tokens = {"<unk>", "<s>", "</s>"};
    request.bos_token = "<s>";
    request.eos_token = "</s>";
    return request;
}

// ---- UTF-8 helpers (independent of the generator's)

bool valid_utf8(std::string_view text) {
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        const std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
        if (length == 0 || i + length > text.size()) return false;
        std::uint32_t value = length == 1 ? lead : lead & (0x7F >> length);
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0) != 0x80) return false;
            value = (value << 6) | (next & 0x3F);
        }
        const std::uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
        if (value < smallest[length] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return false;
        i += length;
    }
    return true;
}

std::vector<std::string> utf8_characters(std::string_view text) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        const std::size_t length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        out.emplace_back(text.substr(i, length));
        i += length;
    }
    return out;
}

std::uint32_t code_point(std::string_view character) {
    const auto lead = static_cast<unsigned char>(character[0]);
    if (character.size() == 1) return lead;
    std::uint32_t value = lead & (0x7F >> character.size());
    for (std::size_t k = 1; k < character.size(); ++k) value = (value << 6) | (character[k] & 0x3F);
    return value;
}

// UTF-8 of a code point below U+0800 (GPT-2's byte symbols go up to U+0143): one or two bytes.
std::string utf8_of(std::uint32_t value) {
    if (value < 0x80) return std::string(1, static_cast<char>(value));
    return {static_cast<char>(0xC0 | (value >> 6)), static_cast<char>(0x80 | (value & 0x3F))};
}

// GPT-2's bytes_to_unicode, written out from its definition.
std::array<std::string, 256> gpt2_byte_symbols() {
    std::array<std::string, 256> symbols;
    std::uint32_t next = 256;
    for (std::uint32_t b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        symbols[b] = utf8_of(printable ? b : next++);
    }
    return symbols;
}

// ---- The generated tokenizer.json, read back

struct LoadedTokenizer {
    json::object root;
    std::map<std::string, std::int64_t> model_vocab;
    std::vector<std::pair<std::string, std::string>> merges;
    std::vector<std::pair<std::int64_t, std::string>> added;  // in file order
    std::map<std::int64_t, std::string> content_of_id;        // model vocab and added tokens
    // (left id, right id) -> (rank, merged id), for merges whose tokens all exist.
    std::unordered_map<std::uint64_t, std::pair<std::size_t, std::int64_t>> merge_of_pair;
};

std::uint64_t pair_key(std::int64_t left, std::int64_t right) {
    return (static_cast<std::uint64_t>(left) << 32) | static_cast<std::uint64_t>(right);
}

LoadedTokenizer load(const SynthTokenizer& tokenizer) {
    LoadedTokenizer out;
    BOOST_TEST_REQUIRE(valid_utf8(tokenizer.tokenizer_json));
    out.root = json::parse(tokenizer.tokenizer_json).as_object();
    const json::object& model = out.root.at("model").as_object();
    for (const auto& [token, id] : model.at("vocab").as_object()) {
        out.model_vocab.emplace(std::string(token), id.as_int64());
        BOOST_TEST_REQUIRE(out.content_of_id.emplace(id.as_int64(), std::string(token)).second,
                           "id " << id.as_int64() << " appears twice in the model vocab");
    }
    for (const json::value& merge : model.at("merges").as_array()) {
        const std::string text(merge.as_string());
        const std::size_t space = text.find(' ');
        BOOST_TEST_REQUIRE((space != std::string::npos && text.find(' ', space + 1) == std::string::npos),
                           "merge '" << text << "' is not 'a b'");
        out.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    }
    for (std::size_t rank = 0; rank < out.merges.size(); ++rank) {
        const auto& [left, right] = out.merges[rank];
        const auto l = out.model_vocab.find(left), r = out.model_vocab.find(right), m = out.model_vocab.find(left + right);
        if (l != out.model_vocab.end() && r != out.model_vocab.end() && m != out.model_vocab.end())
            out.merge_of_pair.emplace(pair_key(l->second, r->second), std::pair{rank, m->second});
    }
    for (const json::value& entry : out.root.at("added_tokens").as_array()) {
        const json::object& token = entry.as_object();
        out.added.emplace_back(token.at("id").as_int64(), std::string(token.at("content").as_string()));
        BOOST_TEST(token.at("special").as_bool());
        BOOST_TEST(!token.at("normalized").as_bool());
        BOOST_TEST(!token.at("lstrip").as_bool());
        BOOST_TEST(!token.at("rstrip").as_bool());
        BOOST_TEST(!token.at("single_word").as_bool());
    }
    return out;
}

// Every id 0..vocab_size-1 names exactly one token across the model vocab and added tokens;
// an added token either is absent from the model vocab or has the same id there.
void check_dense_ids(LoadedTokenizer& loaded, std::int64_t vocab_size) {
    for (const auto& [id, content] : loaded.added) {
        const auto in_model = loaded.model_vocab.find(content);
        if (in_model != loaded.model_vocab.end()) {
            BOOST_TEST(in_model->second == id);
        } else {
            BOOST_TEST_REQUIRE(loaded.content_of_id.emplace(id, content).second, "id " << id << " used twice");
        }
    }
    BOOST_TEST_REQUIRE(static_cast<std::int64_t>(loaded.content_of_id.size()) == vocab_size);
    BOOST_TEST(loaded.content_of_id.begin()->first == 0);
    BOOST_TEST(loaded.content_of_id.rbegin()->first == vocab_size - 1);
}

// Both halves of every merge are tokens, and the merged token exists with a larger id: a
// tokenizers library rejects a merge whose parts or result are missing from the vocab.
void check_merges(const LoadedTokenizer& loaded, std::int64_t first_merge_id) {
    std::int64_t expected_id = first_merge_id;
    for (const auto& [left, right] : loaded.merges) {
        BOOST_TEST_REQUIRE(loaded.model_vocab.contains(left), "merge part '" << left << "' not in vocab");
        BOOST_TEST_REQUIRE(loaded.model_vocab.contains(right), "merge part '" << right << "' not in vocab");
        const auto merged = loaded.model_vocab.find(left + right);
        BOOST_TEST_REQUIRE((merged != loaded.model_vocab.end()), "merge result '" << left + right << "' not in vocab");
        BOOST_TEST(merged->second > loaded.model_vocab.at(left));
        BOOST_TEST(merged->second > loaded.model_vocab.at(right));
        BOOST_TEST(merged->second == expected_id++);  // each merge adds one token, in merge order
    }
}

// ---- Reference encoders and decoders

// Textbook BPE on token ids: merge the lowest-ranked adjacent pair (all its occurrences, left
// to right) until no adjacent pair has a rank.
std::vector<std::int64_t> apply_merges(const LoadedTokenizer& loaded, std::vector<std::int64_t> ids) {
    while (ids.size() > 1) {
        std::size_t best_rank = loaded.merges.size();
        std::uint64_t best_pair = 0;
        std::int64_t merged = -1;
        for (std::size_t k = 0; k + 1 < ids.size(); ++k) {
            const auto found = loaded.merge_of_pair.find(pair_key(ids[k], ids[k + 1]));
            if (found != loaded.merge_of_pair.end() && found->second.first < best_rank) {
                best_rank = found->second.first;
                best_pair = found->first;
                merged = found->second.second;
            }
        }
        if (merged < 0) break;
        std::vector<std::int64_t> next;
        for (std::size_t k = 0; k < ids.size(); ++k) {
            if (k + 1 < ids.size() && pair_key(ids[k], ids[k + 1]) == best_pair) {
                next.push_back(merged);
                ++k;
            } else {
                next.push_back(ids[k]);
            }
        }
        ids = std::move(next);
    }
    return ids;
}

enum class CharClass { letter, number, space, other };

// Enough of Unicode for the samples: Latin letters (with accents) and CJK ideographs are
// letters, ASCII digits numbers, ASCII whitespace spaces; the rest (punctuation, CJK
// punctuation, emoji) is "other".
CharClass classify(std::uint32_t c) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= 0xC0 && c <= 0x24F && c != 0xD7 && c != 0xF7) ||
        (c >= 0x4E00 && c <= 0x9FFF))
        return CharClass::letter;
    if (c >= '0' && c <= '9') return CharClass::number;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return CharClass::space;
    return CharClass::other;
}

// The pieces the Qwen2 Split regex makes of `text`, alternative by alternative:
// (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N} | ' ?[^\s\p{L}\p{N}]+[\r\n]*'
// | \s*[\r\n]+ | \s+(?!\S) | \s+
std::vector<std::string> qwen2_pieces(std::string_view text) {
    const std::vector<std::string> chars = utf8_characters(text);
    const std::size_t n = chars.size();
    const auto cls = [&](std::size_t k) { return classify(code_point(chars[k])); };
    const auto is = [&](std::size_t k, CharClass c) { return k < n && cls(k) == c; };
    const auto is_break = [&](std::size_t k) { return k < n && (chars[k] == "\r" || chars[k] == "\n"); };
    std::vector<std::string> pieces;
    for (std::size_t i = 0; i < n;) {
        std::size_t end = i;
        std::string lower_next;
        for (std::size_t k = i + 1; k < std::min(n, i + 3); ++k)
            lower_next += static_cast<char>(std::tolower(static_cast<unsigned char>(chars[k][0])));
        for (const std::string suffix : {"s", "t", "re", "ve", "m", "ll", "d"})
            if (end == i && chars[i] == "'" && lower_next.starts_with(suffix)) end = i + 1 + suffix.size();
        if (end == i) {
            std::size_t j = i;
            if (!is_break(i) && !is(i, CharClass::letter) && !is(i, CharClass::number) && is(i + 1, CharClass::letter)) ++j;
            if (is(j, CharClass::letter)) {
                while (is(j, CharClass::letter)) ++j;
                end = j;
            }
        }
        if (end == i && is(i, CharClass::number)) end = i + 1;
        if (end == i) {
            std::size_t j = chars[i] == " " && is(i + 1, CharClass::other) ? i + 1 : i;
            if (is(j, CharClass::other)) {
                while (is(j, CharClass::other)) ++j;
                while (is_break(j)) ++j;
                end = j;
            }
        }
        if (end == i) {
            std::size_t run = i;
            while (is(run, CharClass::space)) ++run;
            for (std::size_t k = i; k < run; ++k)
                if (is_break(k)) end = k + 1;
            if (end == i) end = (run == n || run - i == 1) ? run : run - 1;
        }
        std::string piece;
        for (std::size_t k = i; k < end; ++k) piece += chars[k];
        pieces.push_back(piece);
        i = end;
    }
    return pieces;
}

std::vector<std::int64_t> encode_byte_level(const LoadedTokenizer& loaded, std::string_view text) {
    const std::array<std::string, 256> symbol_of_byte = gpt2_byte_symbols();
    std::vector<std::int64_t> ids;
    for (const std::string& piece : qwen2_pieces(text)) {
        std::vector<std::int64_t> symbols;
        for (char c : piece) symbols.push_back(loaded.model_vocab.at(symbol_of_byte[static_cast<unsigned char>(c)]));
        const std::vector<std::int64_t> merged = apply_merges(loaded, symbols);
        ids.insert(ids.end(), merged.begin(), merged.end());
    }
    return ids;
}

std::string decode_byte_level(const LoadedTokenizer& loaded, const std::vector<std::int64_t>& ids) {
    const std::array<std::string, 256> symbol_of_byte = gpt2_byte_symbols();
    std::map<std::string, char> byte_of_symbol;
    for (unsigned b = 0; b < 256; ++b) byte_of_symbol[symbol_of_byte[b]] = static_cast<char>(b);
    std::string out;
    for (std::int64_t id : ids)
        for (const std::string& symbol : utf8_characters(loaded.content_of_id.at(id))) out += byte_of_symbol.at(symbol);
    return out;
}

std::string byte_token(unsigned char b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    return name;
}

// No pre-tokenizer: the whole normalized text is one BPE word; characters missing from the
// vocab fall back to their <0xNN> byte tokens.
std::vector<std::int64_t> encode_sentencepiece(const LoadedTokenizer& loaded, std::string_view text) {
    std::string normalized = metaspace;
    for (char c : text) normalized += c == ' ' ? metaspace : std::string(1, c);
    std::vector<std::int64_t> symbols;
    for (const std::string& character : utf8_characters(normalized)) {
        if (const auto found = loaded.model_vocab.find(character); found != loaded.model_vocab.end())
            symbols.push_back(found->second);
        else
            for (char b : character) symbols.push_back(loaded.model_vocab.at(byte_token(static_cast<unsigned char>(b))));
    }
    return apply_merges(loaded, symbols);
}

// The decoder chain: Replace("▁" -> " "), ByteFallback, Fuse, Strip(1 leading space).
std::string decode_sentencepiece(const LoadedTokenizer& loaded, const std::vector<std::int64_t>& ids) {
    std::string out;
    for (std::int64_t id : ids) {
        const std::string& token = loaded.content_of_id.at(id);
        if (token.size() == 6 && token.starts_with("<0x") && token.ends_with(">")) {
            out += static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16));
            continue;
        }
        for (std::size_t at = 0; at < token.size();) {
            if (token.compare(at, metaspace.size(), metaspace) == 0) {
                out += ' ';
                at += metaspace.size();
            } else {
                out += token[at++];
            }
        }
    }
    if (out.starts_with(" ")) out.erase(0, 1);
    return out;
}

std::string join(const std::vector<std::int64_t>& ids) {
    std::ostringstream out;
    for (std::size_t k = 0; k < ids.size(); ++k) out << (k ? "," : "") << ids[k];
    return out.str();
}

template <class Encode, class Decode>
void check_round_trips(const SynthTokenizer& tokenizer, Encode encode, Decode decode) {
    const LoadedTokenizer loaded = load(tokenizer);
    for (const std::string& sample : samples) {
        const std::vector<std::int64_t> ids = encode(loaded, sample);
        BOOST_TEST_MESSAGE("ids(" << tokenizer.vocab_size << ") " << json::serialize(json::string_view(sample)) << " = ["
                                  << join(ids) << "]");
        BOOST_TEST(!ids.empty());
        for (std::int64_t id : ids) BOOST_TEST((id >= 0 && id < tokenizer.vocab_size));
        BOOST_TEST(decode(loaded, ids) == sample);
    }
}

template <class Function>
void check_usage_error(Function function) {
    try {
        function();
        BOOST_ERROR("no moequant::Error was thrown");
    } catch (const moequant::Error& error) {
        BOOST_TEST((error.kind() == moequant::ErrorKind::usage));
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(synth_tokenizer)

BOOST_AUTO_TEST_CASE(embedded_text_is_public_domain_utf8_without_at_signs) {
    const std::string_view text = embedded_text();
    BOOST_TEST(text.size() > 4000u);
    BOOST_TEST(valid_utf8(text));
    BOOST_TEST(text.find('@') == std::string_view::npos);
    BOOST_TEST(text.find(")moequant_text\"") == std::string_view::npos);
    BOOST_TEST(text.substr(0, text.find('\n')).find("CC0") != std::string_view::npos);
    // Some non-ASCII text so byte fallback and multi-byte symbols get exercised.
    BOOST_TEST(text.find("é") != std::string_view::npos);
    BOOST_TEST(text.find("ß") != std::string_view::npos);
    BOOST_TEST(text.find("专家") != std::string_view::npos);
    BOOST_TEST(text.find("\xF0\x9F") != std::string_view::npos);  // an emoji (4-byte sequence)
}

BOOST_AUTO_TEST_CASE(byte_level_vocabulary_is_dense_with_valid_merges) {
    const std::array<std::string, 256> byte_symbols = gpt2_byte_symbols();
    const std::set<std::string> alphabet(byte_symbols.begin(), byte_symbols.end());
    for (std::int64_t vocab_size : {259, 300, 400, 512, 1024}) {
        BOOST_TEST_CONTEXT("vocab_size " << vocab_size) {
            const SynthTokenizer tokenizer = make_synth_tokenizer(byte_level_request(vocab_size));
            BOOST_TEST(tokenizer.vocab_size == vocab_size);
            LoadedTokenizer loaded = load(tokenizer);

            // 256 byte symbols at ids 0..255 ("!" first, as GPT-2 and Qwen), merges after them,
            // special tokens last and only as added tokens.
            std::set<std::string> base;
            for (std::int64_t id = 0; id < 256; ++id) base.insert(loaded.content_of_id.at(id));
            BOOST_TEST((base == alphabet));
            BOOST_TEST(loaded.model_vocab.at("!") == 0);
            BOOST_TEST(loaded.merges.size() == static_cast<std::size_t>(vocab_size - 256 - 3));
            BOOST_TEST(loaded.model_vocab.size() == static_cast<std::size_t>(vocab_size - 3));
            check_merges(loaded, 256);

            const std::vector<std::pair<std::int64_t, std::string>> expected_added = {
                {vocab_size - 3, "<|endoftext|>"}, {vocab_size - 2, "<|im_start|>"}, {vocab_size - 1, "<|im_end|>"}};
            BOOST_TEST((loaded.added == expected_added));
            for (const auto& [id, content] : expected_added) BOOST_TEST(!loaded.model_vocab.contains(content));
            check_dense_ids(loaded, vocab_size);
            BOOST_TEST(tokenizer.bos_token_id == -1);
            BOOST_TEST(tokenizer.eos_token_id == vocab_size - 1);
        }
    }
}

BOOST_AUTO_TEST_CASE(byte_level_components_follow_qwen) {
    const LoadedTokenizer loaded = load(make_synth_tokenizer(byte_level_request(400)));
    const json::object& root = loaded.root;
    BOOST_TEST(root.at("version").as_string() == "1.0");
    BOOST_TEST(root.at("truncation").is_null());
    BOOST_TEST(root.at("padding").is_null());
    BOOST_TEST(root.at("normalizer").at("type").as_string() == "NFC");

    const json::object& pre = root.at("pre_tokenizer").as_object();
    BOOST_TEST(pre.at("type").as_string() == "Sequence");
    const json::array& steps = pre.at("pretokenizers").as_array();
    BOOST_TEST_REQUIRE(steps.size() == 2u);
    BOOST_TEST(steps[0].at("type").as_string() == "Split");
    BOOST_TEST(steps[0].at("pattern").at("Regex").as_string() ==
               R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
    BOOST_TEST(steps[0].at("behavior").as_string() == "Isolated");
    BOOST_TEST(!steps[0].at("invert").as_bool());
    for (const json::value* byte_level : {&steps[1], &root.at("decoder"), &root.at("post_processor")}) {
        BOOST_TEST(byte_level->at("type").as_string() == "ByteLevel");
        BOOST_TEST(!byte_level->at("add_prefix_space").as_bool());
        BOOST_TEST(!byte_level->at("trim_offsets").as_bool());
        BOOST_TEST(!byte_level->at("use_regex").as_bool());
    }

    const json::object& model = root.at("model").as_object();
    BOOST_TEST(model.at("type").as_string() == "BPE");
    BOOST_TEST(model.at("unk_token").is_null());
    BOOST_TEST(model.at("dropout").is_null());
    BOOST_TEST(model.at("continuing_subword_prefix").is_null());
    BOOST_TEST(model.at("end_of_word_suffix").is_null());
    BOOST_TEST(!model.at("byte_fallback").as_bool());
    BOOST_TEST(!model.at("fuse_unk").as_bool());
    BOOST_TEST(!model.at("ignore_merges").as_bool());
}

BOOST_AUTO_TEST_CASE(sentencepiece_vocabulary_is_dense_with_valid_merges) {
    for (std::int64_t vocab_size : {400, 512, 1024}) {
        BOOST_TEST_CONTEXT("vocab_size " << vocab_size) {
            const SynthTokenizer tokenizer = make_synth_tokenizer(sentencepiece_request(vocab_size));
            LoadedTokenizer loaded = load(tokenizer);
            BOOST_TEST(loaded.model_vocab.at("<unk>") == 0);
            BOOST_TEST(loaded.model_vocab.at("<s>") == 1);
            BOOST_TEST(loaded.model_vocab.at("</s>") == 2);
            for (unsigned b = 0; b < 256; ++b)
                BOOST_TEST(loaded.model_vocab.at(byte_token(static_cast<unsigned char>(b))) == 3 + b);

            // Then every character of the normalized training text ("▁" for the space).
            std::set<std::string> characters = {metaspace};
            for (const std::string& c : utf8_characters(embedded_text()))
                if (c != " ") characters.insert(c);
            const auto first_merge_id = static_cast<std::int64_t>(259 + characters.size());
            for (std::int64_t id = 259; id < first_merge_id; ++id)
                BOOST_TEST(characters.contains(loaded.content_of_id.at(id)));
            BOOST_TEST(loaded.merges.size() == static_cast<std::size_t>(vocab_size - first_merge_id));
            check_merges(loaded, first_merge_id);

            const std::vector<std::pair<std::int64_t, std::string>> expected_added = {{0, "<unk>"}, {1, "<s>"}, {2, "</s>"}};
            BOOST_TEST((loaded.added == expected_added));
            check_dense_ids(loaded, vocab_size);
            BOOST_TEST(tokenizer.bos_token_id == 1);
            BOOST_TEST(tokenizer.eos_token_id == 2);
        }
    }
}

BOOST_AUTO_TEST_CASE(sentencepiece_extra_special_tokens_come_last) {
    TokenizerRequest request = sentencepiece_request(600);
    request.special_tokens.push_back("<pad>");
    LoadedTokenizer loaded = load(make_synth_tokenizer(request));
    BOOST_TEST(loaded.added.back().first == 599);
    BOOST_TEST(loaded.added.back().second == "<pad>");
    BOOST_TEST(!loaded.model_vocab.contains("<pad>"));
    check_dense_ids(loaded, 600);
}

BOOST_AUTO_TEST_CASE(sentencepiece_components_follow_llama2) {
    const LoadedTokenizer loaded = load(make_synth_tokenizer(sentencepiece_request(512)));
    const json::object& root = loaded.root;
    const json::array& normalizers = root.at("normalizer").at("normalizers").as_array();
    BOOST_TEST(root.at("normalizer").at("type").as_string() == "Sequence");
    BOOST_TEST_REQUIRE(normalizers.size() == 2u);
    BOOST_TEST(normalizers[0].at("type").as_string() == "Prepend");
    BOOST_TEST(normalizers[0].at("prepend").as_string() == metaspace);
    BOOST_TEST(normalizers[1].at("type").as_string() == "Replace");
    BOOST_TEST(normalizers[1].at("pattern").at("String").as_string() == " ");
    BOOST_TEST(normalizers[1].at("content").as_string() == metaspace);
    BOOST_TEST(root.at("pre_tokenizer").is_null());

    const json::array& decoders = root.at("decoder").at("decoders").as_array();
    BOOST_TEST_REQUIRE(decoders.size() == 4u);
    BOOST_TEST(decoders[0].at("type").as_string() == "Replace");
    BOOST_TEST(decoders[0].at("pattern").at("String").as_string() == metaspace);
    BOOST_TEST(decoders[0].at("content").as_string() == " ");
    BOOST_TEST(decoders[1].at("type").as_string() == "ByteFallback");
    BOOST_TEST(decoders[2].at("type").as_string() == "Fuse");
    BOOST_TEST(decoders[3].at("type").as_string() == "Strip");
    BOOST_TEST(decoders[3].at("start").as_int64() == 1);
    BOOST_TEST(decoders[3].at("stop").as_int64() == 0);

    const json::object& post = root.at("post_processor").as_object();
    BOOST_TEST(post.at("type").as_string() == "TemplateProcessing");
    BOOST_TEST(post.at("single").at(0).at("SpecialToken").at("id").as_string() == "<s>");
    BOOST_TEST(post.at("single").at(1).at("Sequence").at("id").as_string() == "A");
    BOOST_TEST(post.at("special_tokens").at("<s>").at("ids").at(0).as_int64() == 1);

    const json::object& model = root.at("model").as_object();
    BOOST_TEST(model.at("unk_token").as_string() == "<unk>");
    BOOST_TEST(model.at("byte_fallback").as_bool());
    BOOST_TEST(model.at("fuse_unk").as_bool());
    BOOST_TEST(!model.at("ignore_merges").as_bool());
}

BOOST_AUTO_TEST_CASE(config_files_name_the_special_tokens) {
    const TokenizerRequest request = byte_level_request(512);
    const SynthTokenizer tokenizer = make_synth_tokenizer(request);
    const json::object config = json::parse(tokenizer.tokenizer_config_json).as_object();
    BOOST_TEST(config.at("tokenizer_class").as_string() == "PreTrainedTokenizerFast");
    BOOST_TEST(config.at("bos_token").is_null());
    BOOST_TEST(config.at("eos_token").as_string() == "<|im_end|>");
    BOOST_TEST(config.at("chat_template").as_string() == request.chat_template);
    BOOST_TEST(!config.at("clean_up_tokenization_spaces").as_bool());
    BOOST_TEST(config.at("model_max_length").as_int64() > 0);
    const json::object& decoder = config.at("added_tokens_decoder").as_object();
    BOOST_TEST(decoder.size() == 3u);
    BOOST_TEST(decoder.at("511").at("content").as_string() == "<|im_end|>");
    BOOST_TEST(decoder.at("509").at("content").as_string() == "<|endoftext|>");
    BOOST_TEST(decoder.at("509").at("special").as_bool());
    const json::object map = json::parse(tokenizer.special_tokens_map_json).as_object();
    BOOST_TEST(map.at("eos_token").at("content").as_string() == "<|im_end|>");
    BOOST_TEST(!map.contains("bos_token"));

    const SynthTokenizer llama = make_synth_tokenizer(sentencepiece_request(512));
    const json::object llama_config = json::parse(llama.tokenizer_config_json).as_object();
    BOOST_TEST(llama_config.at("tokenizer_class").as_string() == "LlamaTokenizerFast");
    BOOST_TEST(llama_config.at("bos_token").as_string() == "<s>");
    BOOST_TEST(llama_config.at("eos_token").as_string() == "</s>");
    BOOST_TEST(llama_config.at("unk_token").as_string() == "<unk>");
    BOOST_TEST(!llama_config.contains("chat_template"));
    BOOST_TEST(llama_config.at("added_tokens_decoder").at("1").at("content").as_string() == "<s>");
    const json::object llama_map = json::parse(llama.special_tokens_map_json).as_object();
    BOOST_TEST(llama_map.at("bos_token").at("content").as_string() == "<s>");
    BOOST_TEST(llama_map.at("eos_token").at("content").as_string() == "</s>");
    BOOST_TEST(llama_map.at("unk_token").at("content").as_string() == "<unk>");
}

BOOST_AUTO_TEST_CASE(sizes_out_of_range_are_usage_errors) {
    check_usage_error([] { make_synth_tokenizer(byte_level_request(258)); });
    check_usage_error([] { make_synth_tokenizer(byte_level_request(0)); });
    check_usage_error([] { make_synth_tokenizer(byte_level_request(-5)); });
    check_usage_error([] { make_synth_tokenizer(byte_level_request(1'000'000)); });
    check_usage_error([] { make_synth_tokenizer(sentencepiece_request(300)); });
    check_usage_error([] { make_synth_tokenizer(sentencepiece_request(1'000'000)); });
}

BOOST_AUTO_TEST_CASE(largest_size_is_reachable_and_one_more_is_not) {
    for (const TokenizerRequest& too_large : {byte_level_request(1'000'000), sentencepiece_request(1'000'000)}) {
        std::int64_t largest = 0;
        try {
            make_synth_tokenizer(too_large);
        } catch (const moequant::Error& error) {
            const std::string& hint = error.context().hint;  // "use vocab_size <= N"
            largest = std::stoll(hint.substr(hint.rfind(' ') + 1));
        }
        BOOST_TEST_MESSAGE("largest vocab_size " << largest);
        BOOST_TEST_REQUIRE(largest > 1024);
        TokenizerRequest request = too_large;
        request.vocab_size = largest;
        LoadedTokenizer loaded = load(make_synth_tokenizer(request));
        check_dense_ids(loaded, largest);
        request.vocab_size = largest + 1;
        check_usage_error([&] { make_synth_tokenizer(request); });
    }
}

BOOST_AUTO_TEST_CASE(bad_special_tokens_are_usage_errors) {
    TokenizerRequest request = byte_level_request(512);
    request.bos_token = "<bos>";  // not among the special tokens
    check_usage_error([&] { make_synth_tokenizer(request); });
    request = byte_level_request(512);
    request.special_tokens.push_back("<|im_end|>");  // twice
    check_usage_error([&] { make_synth_tokenizer(request); });
    request = byte_level_request(512);
    request.special_tokens.push_back("");
    check_usage_error([&] { make_synth_tokenizer(request); });
    request = byte_level_request(512);
    request.special_tokens.push_back("a");  // an ordinary byte symbol
    check_usage_error([&] { make_synth_tokenizer(request); });
    request = sentencepiece_request(512);
    request.special_tokens = {"<s>", "</s>"};  // sentencepiece needs <unk>, <s>, </s> first
    request.bos_token = "<s>";
    check_usage_error([&] { make_synth_tokenizer(request); });
}

BOOST_AUTO_TEST_CASE(generation_is_deterministic) {
    for (const TokenizerRequest& request : {byte_level_request(700), sentencepiece_request(700)}) {
        const SynthTokenizer first = make_synth_tokenizer(request);
        const SynthTokenizer second = make_synth_tokenizer(request);
        BOOST_TEST(first.tokenizer_json == second.tokenizer_json);
        BOOST_TEST(first.tokenizer_config_json == second.tokenizer_config_json);
        BOOST_TEST(first.special_tokens_map_json == second.special_tokens_map_json);
    }
}

BOOST_AUTO_TEST_CASE(byte_level_encoding_round_trips) {
    for (std::int64_t vocab_size : {259, 300, 512, 1024})
        check_round_trips(make_synth_tokenizer(byte_level_request(vocab_size)), encode_byte_level, decode_byte_level);
}

BOOST_AUTO_TEST_CASE(sentencepiece_encoding_round_trips) {
    for (std::int64_t vocab_size : {400, 512, 1024})
        check_round_trips(make_synth_tokenizer(sentencepiece_request(vocab_size)), encode_sentencepiece,
                          decode_sentencepiece);
}

BOOST_AUTO_TEST_CASE(larger_vocabularies_compress_the_training_text) {
    std::size_t previous = SIZE_MAX;
    for (std::int64_t vocab_size : {300, 512, 1024}) {
        const LoadedTokenizer loaded = load(make_synth_tokenizer(byte_level_request(vocab_size)));
        const std::vector<std::int64_t> ids = encode_byte_level(loaded, embedded_text());
        BOOST_TEST_MESSAGE("byte_level_bpe " << vocab_size << ": embedded text in " << ids.size() << " tokens");
        BOOST_TEST(decode_byte_level(loaded, ids) == embedded_text());
        BOOST_TEST(ids.size() < previous);
        previous = ids.size();
    }
    BOOST_TEST(previous < embedded_text().size() / 3);
    previous = SIZE_MAX;
    for (std::int64_t vocab_size : {400, 512, 1024}) {
        const LoadedTokenizer loaded = load(make_synth_tokenizer(sentencepiece_request(vocab_size)));
        const std::vector<std::int64_t> ids = encode_sentencepiece(loaded, embedded_text());
        BOOST_TEST_MESSAGE("sentencepiece_bpe " << vocab_size << ": embedded text in " << ids.size() << " tokens");
        BOOST_TEST(decode_sentencepiece(loaded, ids) == embedded_text());
        BOOST_TEST(ids.size() < previous);
        previous = ids.size();
    }
}

// The engine's Tokenizer (what calibration uses) reads the synthesized files and gives the ids
// this test's own encoders give.
BOOST_AUTO_TEST_CASE(the_core_tokenizer_encodes_synthesized_files_the_same_way) {
    for (const bool byte_level : {true, false}) {
        const SynthTokenizer synth = make_synth_tokenizer(byte_level ? byte_level_request(512) : sentencepiece_request(512));
        const moequant::Tokenizer tokenizer =
            moequant::Tokenizer::parse(synth.tokenizer_json, synth.tokenizer_config_json, "synthesized tokenizer.json");
        const LoadedTokenizer loaded = load(synth);
        const std::vector<std::int64_t> expected =
            byte_level ? encode_byte_level(loaded, embedded_text()) : encode_sentencepiece(loaded, embedded_text());
        const std::vector<std::int32_t> got = tokenizer.encode(embedded_text());
        BOOST_TEST(std::vector<std::int64_t>(got.begin(), got.end()) == expected, boost::test_tools::per_element());
        BOOST_TEST(tokenizer.vocab_size() == 512);
    }
}


BOOST_AUTO_TEST_SUITE_END()
