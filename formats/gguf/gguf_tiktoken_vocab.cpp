#include "gguf_tiktoken_vocab.hpp"

#include "gguf_vocab_detail.hpp"

#include <moequant/error.hpp>
#include <moequant/input_file.hpp>
#include <moequant/printable.hpp>

#include <array>
#include <charconv>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace moequant::formats {
namespace {

using namespace vocab_detail;

// The special slots Kimi's tokenization_kimi.py reserves after the ranks.
constexpr std::int64_t reserved_special_slots = 256;

// Strict base64 (RFC 4648, padded): nullopt for anything else.
std::optional<std::string> base64_decode(std::string_view text) {
    static const std::array<int, 256> value = [] {
        std::array<int, 256> v;
        v.fill(-1);
        const std::string_view digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (std::size_t i = 0; i < digits.size(); ++i) v[static_cast<unsigned char>(digits[i])] = static_cast<int>(i);
        return v;
    }();
    if (text.empty() || text.size() % 4 != 0) return std::nullopt;
    const std::size_t padding = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (std::size_t at = 0; at < text.size(); at += 4) {
        std::uint32_t group = 0;
        const bool last = at + 4 == text.size();
        for (std::size_t k = 0; k < 4; ++k) {
            const char c = text[at + k];
            const bool pad = last && k >= 4 - padding;
            if (pad ? c != '=' : value[static_cast<unsigned char>(c)] < 0) return std::nullopt;
            group = group << 6 | static_cast<std::uint32_t>(pad ? 0 : value[static_cast<unsigned char>(c)]);
        }
        const std::size_t bytes = last ? 3 - padding : 3;
        for (std::size_t k = 0; k < bytes; ++k) out += static_cast<char>(group >> (16 - 8 * k) & 0xFF);
    }
    return out;
}

// QwenModel.bpe(mergeable_ranks, token, max_rank=rank): merges the adjacent pair of lowest rank
// (the first of equal ones) until none below max_rank is left; the parts it stops at.
std::vector<std::string> bpe_parts(const std::unordered_map<std::string, std::int64_t>& ranks, const std::string& token, std::int64_t max_rank) {
    std::vector<std::string> parts;
    for (char b : token) parts.emplace_back(1, b);
    for (;;) {
        std::optional<std::size_t> best;
        std::int64_t best_rank = 0;
        for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
            const auto it = ranks.find(parts[i] + parts[i + 1]);
            if (it != ranks.end() && (!best || it->second < best_rank)) {
                best = i;
                best_rank = it->second;
            }
        }
        if (!best || best_rank >= max_rank) return parts;
        parts[*best] += parts[*best + 1];
        parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(*best) + 1);
    }
}

}  // namespace

std::string byte_level_text(std::string_view bytes) {
    // GPT-2's bytes_to_unicode: printable Latin-1 stands for itself, the 68 other bytes take
    // U+0100 upwards in byte order; each character's UTF-8 (all below U+0800).
    static const std::array<std::string, 256> glyphs = [] {
        std::array<std::string, 256> table;
        std::uint32_t next_unprintable = 0x100;
        for (std::uint32_t b = 0; b < 256; ++b) {
            const bool shown = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            const std::uint32_t code = shown ? b : next_unprintable++;
            table[b] = code < 0x80 ? std::string(1, static_cast<char>(code))
                                   : std::string{static_cast<char>(0xC0 | code >> 6), static_cast<char>(0x80 | (code & 0x3F))};
        }
        return table;
    }();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) out += glyphs[b];
    return out;
}

std::vector<TiktokenRank> read_tiktoken_ranks(const std::filesystem::path& file) {
    const std::string text = read_small_file(file, tokenizer_file_limit);
    std::vector<TiktokenRank> ranks;
    std::unordered_set<std::string> seen_bytes;
    std::unordered_set<std::int64_t> seen_ranks;
    std::size_t line_number = 0;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        std::string_view line(text.data() + at, end - at);
        at = end + 1;
        ++line_number;
        if (line.ends_with('\r')) line.remove_suffix(1);
        if (line.empty()) continue;  // load_tiktoken_bpe skips empty lines
        const std::string where = "line " + std::to_string(line_number);
        const std::size_t space = line.find(' ');
        const std::optional<std::string> bytes = space == std::string_view::npos ? std::nullopt : base64_decode(line.substr(0, space));
        std::int64_t rank = -1;
        const std::string_view number = space == std::string_view::npos ? std::string_view{} : line.substr(space + 1);
        const auto [stop, ec] = std::from_chars(number.data(), number.data() + number.size(), rank);
        if (!bytes || ec != std::errc() || stop != number.data() + number.size() || number.empty())
            refuse(file, where + " is not \"base64 rank\": " + printable_name(line.substr(0, 80)), "BadTiktoken");
        if (rank < 0 || rank >= gguf_max_vocab_size)
            refuse(file, where + " has rank " + std::to_string(rank) + ", not in [0, " + std::to_string(gguf_max_vocab_size) + ")", "BadTiktoken");
        if (!seen_ranks.insert(rank).second) refuse(file, where + " gives rank " + std::to_string(rank) + " a second time", "BadTiktoken");
        if (!seen_bytes.insert(*bytes).second) refuse(file, where + " repeats the token of an earlier line", "BadTiktoken");
        ranks.push_back({*bytes, rank});
    }
    if (ranks.empty()) refuse(file, "holds no token", "BadTiktoken");
    // The special slots start at len(ranks): ranks with gaps would give an id two tokens.
    for (const TiktokenRank& r : ranks)
        if (r.rank >= static_cast<std::int64_t>(ranks.size()))
            refuse(file, "has rank " + std::to_string(r.rank) + " among " + std::to_string(ranks.size()) + " tokens; the ranks must be 0.." +
                             std::to_string(ranks.size() - 1),
                   "BadTiktoken");
    return ranks;
}

std::vector<std::string> tiktoken_merges(const std::vector<TiktokenRank>& ranks) {
    std::unordered_map<std::string, std::int64_t> by_bytes;
    by_bytes.reserve(ranks.size());
    for (const TiktokenRank& r : ranks) by_bytes.emplace(r.bytes, r.rank);
    std::vector<std::string> merges;
    for (const TiktokenRank& r : ranks) {
        if (r.bytes.size() < 2) continue;
        const std::vector<std::string> parts = bpe_parts(by_bytes, r.bytes, r.rank);
        if (parts.size() == 2) merges.push_back(byte_level_text(parts[0]) + " " + byte_level_text(parts[1]));
    }
    return merges;
}

std::vector<GgufKeyValue> gguf_tiktoken_vocab(const std::filesystem::path& model_dir, const GgufVocabRequest& request) {
    const std::filesystem::path file = model_dir / tiktoken_file_name;
    const std::vector<TiktokenRank> ranks = read_tiktoken_ranks(file);
    const auto base = static_cast<std::int64_t>(ranks.size());
    const std::int64_t size = request.vocab_size > 0 ? request.vocab_size : base + reserved_special_slots;
    if (size > gguf_max_vocab_size || size < base)
        refuse(model_dir / "config.json", "vocab_size " + std::to_string(size) + " does not hold " + file.filename().string() + "'s " + std::to_string(base) + " tokens",
               "BadVocabSize");

    std::vector<std::string> tokens(static_cast<std::size_t>(size));
    std::vector<std::int32_t> types(static_cast<std::size_t>(size), token_unused);
    for (const TiktokenRank& r : ranks) {
        tokens[static_cast<std::size_t>(r.rank)] = byte_level_text(r.bytes);
        types[static_cast<std::size_t>(r.rank)] = token_normal;
    }
    // tokenization_kimi.py: slot i is added_tokens_decoder[i]'s content, else <|reserved_token_i|>.
    const json::object config = read_optional_object(model_dir / "tokenizer_config.json");
    const json::object* named = object_at(&config, "added_tokens_decoder");
    for (std::int64_t id = base; id < std::min(size, base + reserved_special_slots); ++id) {
        const json::string* content = string_at(object_at(named, std::to_string(id)), "content");
        tokens[static_cast<std::size_t>(id)] = content ? std::string(*content) : "<|reserved_token_" + std::to_string(id) + "|>";
        types[static_cast<std::size_t>(id)] = token_control;
    }
    for (std::int64_t id = base + reserved_special_slots; id < size; ++id) tokens[static_cast<std::size_t>(id)] = "[PAD" + std::to_string(id) + "]";

    std::vector<GgufKeyValue> out;
    out.push_back({"tokenizer.ggml.model", GgufValue::string("gpt2")});
    out.push_back({"tokenizer.ggml.pre", GgufValue::string(request.pre)});
    out.push_back({"tokenizer.ggml.tokens", GgufValue::strings(tokens)});
    out.push_back({"tokenizer.ggml.token_type", GgufValue::i32s(types)});
    out.push_back({"tokenizer.ggml.merges", GgufValue::strings(tiktoken_merges(ranks))});
    for (auto& kv : special_vocab_keys(model_dir, nullptr, tokens.size(), request.named_specials)) out.push_back(std::move(kv));
    return out;
}

}  // namespace moequant::formats
