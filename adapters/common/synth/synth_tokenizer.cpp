// Synthetic BPE tokenizers in the Hugging Face tokenizer.json format (see synth_tokenizer.hpp).
//
// The two styles copy the layouts the families ship: byte_level_bpe is Qwen2/Qwen3's (NFC,
// Split with the Qwen2 regex then ByteLevel, BPE over the 256 GPT-2 byte symbols);
// sentencepiece_bpe is Llama-2/Mixtral's (Prepend + Replace "▁" normalizer, no pre-tokenizer,
// BPE over characters with <0xNN> byte fallback).
#include "synth_tokenizer.hpp"

#include <moequant/error.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace moequant::adapters {
namespace {

namespace json = boost::json;

constexpr std::string_view metaspace = "\xE2\x96\x81";  // "▁" U+2581, SentencePiece's space

// The pre-tokenization regex of Qwen2/Qwen3 (and, with \p{N}{1,3}, of Llama-3).
constexpr std::string_view qwen2_split_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr std::array<std::string_view, 3> sentencepiece_leading_specials = {"<unk>", "<s>", "</s>"};

[[noreturn]] void fail(const std::string& message, const std::string& hint = {}) {
    throw_usage_error(message, ErrorContext{.code = "SynthTokenizer", .hint = hint});
}

// ---------------------------------------------------------------------------------------------
// UTF-8

struct CodePoint {
    char32_t value;
    std::string_view bytes;
};

// Bytes in the UTF-8 sequence that `lead` starts; 0 for a byte that cannot start one.
std::size_t sequence_length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 0;
}

// A malformed byte becomes a code point of its own (value U+FFFD) so that no input byte is lost;
// the embedded text is valid UTF-8 (a unit test checks it), so this only guards against a bad
// edit of it.
std::vector<CodePoint> code_points(std::string_view text) {
    std::vector<CodePoint> out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        std::size_t length = sequence_length(lead);
        if (i + length > text.size()) length = 0;
        char32_t value = length <= 1 ? lead : lead & (0x7Fu >> length);
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0u) != 0x80u) {
                length = 0;
                break;
            }
            value = (value << 6) | (next & 0x3Fu);
        }
        if (length == 0) {
            out.push_back({U'\uFFFD', text.substr(i, 1)});
            ++i;
        } else {
            out.push_back({value, text.substr(i, length)});
            i += length;
        }
    }
    return out;
}

std::string utf8(char32_t value) {
    std::string out;
    if (value < 0x80) {
        out += static_cast<char>(value);
    } else if (value < 0x800) {
        out += static_cast<char>(0xC0 | (value >> 6));
        out += static_cast<char>(0x80 | (value & 0x3F));
    } else if (value < 0x10000) {
        out += static_cast<char>(0xE0 | (value >> 12));
        out += static_cast<char>(0x80 | ((value >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (value & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (value >> 18));
        out += static_cast<char>(0x80 | ((value >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((value >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (value & 0x3F));
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// GPT-2 byte alphabet

// GPT-2's reversible byte -> printable character map: the printable Latin-1 bytes stand for
// themselves, the other 68 bytes get U+0100, U+0101, ... in byte order. Base ids follow GPT-2
// and Qwen: printable bytes first (so "!" is id 0), then the remapped ones.
struct ByteAlphabet {
    std::array<std::string, 256> symbol_of_byte;
    std::vector<unsigned char> bytes_in_id_order;
};

ByteAlphabet make_byte_alphabet() {
    const auto printable = [](unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; };
    ByteAlphabet alphabet;
    unsigned remapped = 0;
    for (unsigned b = 0; b < 256; ++b) {
        alphabet.symbol_of_byte[b] = utf8(printable(b) ? b : 256 + remapped++);
        if (printable(b)) alphabet.bytes_in_id_order.push_back(static_cast<unsigned char>(b));
    }
    for (unsigned b = 0; b < 256; ++b)
        if (!printable(b)) alphabet.bytes_in_id_order.push_back(static_cast<unsigned char>(b));
    return alphabet;
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenization for training

// Stand-ins for the regex classes \p{L}, \p{N} and \s, without a Unicode database: the main
// blocks of Latin, Greek, Cyrillic, CJK, kana and Hangul letters, ASCII/Latin-1 digits and the
// White_Space characters. That is right for every character of the embedded text (the split
// below was compared with a Unicode-aware regex engine on it); anything unknown counts as
// "other", like punctuation, symbols and emoji.
bool is_letter(char32_t c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == 0xAA || c == 0xB5 || c == 0xBA ||
           (c >= 0xC0 && c <= 0x24F && c != 0xD7 && c != 0xF7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) ||
           (c >= 0x3AC && c <= 0x3CE) || (c >= 0x400 && c <= 0x481) || (c >= 0x48A && c <= 0x52F) ||
           (c >= 0x3041 && c <= 0x3096) || (c >= 0x30A1 && c <= 0x30FA) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7A3);
}

bool is_number(char32_t c) {
    return (c >= '0' && c <= '9') || c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0xBC && c <= 0xBE);
}

bool is_whitespace(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

bool is_line_break(char32_t c) { return c == '\r' || c == '\n'; }

char32_t ascii_lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }

// End (exclusive) of the qwen2_split_regex match that starts at cps[i]. The alternatives are
// tried in the regex's order (leftmost-first), each with the outcome its greedy quantifiers and
// backtracking give; one always matches, so the result is > i.
std::size_t qwen2_match_end(const std::vector<CodePoint>& cps, std::size_t i) {
    const std::size_t n = cps.size();
    const auto at = [&](std::size_t k) { return k < n ? cps[k].value : char32_t{0}; };
    const auto letter = [&](std::size_t k) { return k < n && is_letter(cps[k].value); };
    const auto number = [&](std::size_t k) { return k < n && is_number(cps[k].value); };
    const auto space = [&](std::size_t k) { return k < n && is_whitespace(cps[k].value); };
    const auto other = [&](std::size_t k) { return k < n && !letter(k) && !number(k) && !space(k); };

    // (?i:'s|'t|'re|'ve|'m|'ll|'d), with ASCII case folding
    if (at(i) == '\'') {
        for (std::u32string_view suffix : {U"s", U"t", U"re", U"ve", U"m", U"ll", U"d"}) {
            bool matches = true;
            for (std::size_t k = 0; k < suffix.size() && matches; ++k)
                matches = ascii_lower(at(i + 1 + k)) == suffix[k];
            if (matches) return i + 1 + suffix.size();
        }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    std::size_t j = i;
    if (i < n && !is_line_break(at(i)) && !letter(i) && !number(i) && letter(i + 1)) ++j;
    if (letter(j)) {
        while (letter(j)) ++j;
        return j;
    }
    // \p{N}
    if (number(i)) return i + 1;
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    j = at(i) == ' ' && other(i + 1) ? i + 1 : i;
    if (other(j)) {
        while (other(j)) ++j;
        while (j < n && is_line_break(at(j))) ++j;
        return j;
    }
    // cps[i] is whitespace from here on. \s*[\r\n]+ ends after the run's last line break.
    std::size_t run_end = i;
    while (space(run_end)) ++run_end;
    for (std::size_t k = run_end; k > i; --k)
        if (is_line_break(at(k - 1))) return k;
    if (run_end == n) return run_end;          // \s+(?!\S) at the end of the text
    if (run_end - i >= 2) return run_end - 1;  // \s+(?!\S) leaves the last space to the next piece
    return run_end;                            // \s+
}

// Splits `text` as the Split pre-tokenizer (qwen2_split_regex, Isolated) does. std::regex has
// no \p{L}/\p{N}, so the regex is evaluated by hand (qwen2_match_end), with the Unicode classes
// approximated well enough for the training text; the merges would stay valid even where the
// approximation differs, only less typical.
std::vector<std::string_view> split_like_qwen2(std::string_view text) {
    const std::vector<CodePoint> cps = code_points(text);
    std::vector<std::string_view> pieces;
    for (std::size_t i = 0; i < cps.size();) {
        const std::size_t end = qwen2_match_end(cps, i);
        const char* first = cps[i].bytes.data();
        const char* last = cps[end - 1].bytes.data() + cps[end - 1].bytes.size();
        pieces.emplace_back(first, static_cast<std::size_t>(last - first));
        i = end;
    }
    return pieces;
}

// The sentencepiece_bpe normalizer: Prepend("▁") then Replace(" " -> "▁").
std::string normalize_metaspace(std::string_view text) {
    std::string out(metaspace);
    for (char c : text) {
        if (c == ' ')
            out += metaspace;
        else
            out += c;
    }
    return out;
}

// Training words for sentencepiece_bpe. The tokenizer itself has no pre-tokenizer, but
// SentencePiece trains on whitespace-delimited pieces with "▁" as the prefix of the following
// word; line breaks stand alone so that no merge spans two lines.
std::vector<std::vector<CodePoint>> split_metaspace_words(std::string_view normalized) {
    std::vector<std::vector<CodePoint>> words;
    char32_t previous = U'\n';
    for (const CodePoint& cp : code_points(normalized)) {
        const bool marker = cp.bytes == metaspace;
        const bool starts_word = words.empty() || is_line_break(cp.value) || is_line_break(previous) ||
                                 (marker && cp.value != previous);
        if (starts_word) words.emplace_back();
        words.back().push_back(cp);
        previous = cp.value;
    }
    return words;
}

// ---------------------------------------------------------------------------------------------
// BPE training

struct Merge {
    std::string left;
    std::string right;
};

struct WeightedWord {
    std::vector<std::int32_t> symbols;  // indices into the trainer's symbol table
    std::int64_t count = 0;
};

// Merges every occurrence of (left, right) in `symbols`, left to right; false if there is none.
bool merge_pair(std::vector<std::int32_t>& symbols, std::int32_t left, std::int32_t right, std::int32_t merged) {
    std::size_t out = 0;
    for (std::size_t k = 0; k < symbols.size();) {
        if (k + 1 < symbols.size() && symbols[k] == left && symbols[k + 1] == right) {
            symbols[out++] = merged;
            k += 2;
        } else {
            symbols[out++] = symbols[k++];
        }
    }
    const bool changed = out != symbols.size();
    symbols.resize(out);
    return changed;
}

// Greedy BPE training. Each round merges the most frequent adjacent pair, counted over the words
// with their weights; ties go to the pair whose (left, right) strings are bytewise smallest. A
// pair whose concatenation is already a token (a base symbol, an earlier result, or one of
// `reserved`) is never chosen, so every merge adds exactly one token and ids stay dense. Stops
// after `wanted` merges or when no pair is left (then fewer are returned).
//
// Pair counts are kept up to date incrementally (only the words holding the merged pair are
// recounted), so training to exhaustion, which every "too large" request does, stays fast.
std::vector<Merge> train_bpe(std::vector<std::string> symbols, std::vector<WeightedWord> words,
                             std::size_t wanted, const std::set<std::string>& reserved) {
    std::unordered_set<std::string> taken(symbols.begin(), symbols.end());
    taken.insert(reserved.begin(), reserved.end());
    const auto pair_key = [](std::int32_t left, std::int32_t right) {
        return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
    };

    struct Candidate {
        std::int64_t count;
        std::int32_t left, right;
    };
    // Best first: larger count, then bytewise smaller (left, right). Token strings are unique,
    // so this is a strict total order over distinct pairs.
    const auto better = [&symbols](const Candidate& a, const Candidate& b) {
        if (a.count != b.count) return a.count > b.count;
        return std::tie(symbols[a.left], symbols[a.right]) < std::tie(symbols[b.left], symbols[b.right]);
    };
    std::set<Candidate, decltype(better)> candidates(better);
    std::unordered_map<std::uint64_t, std::int64_t> counts;
    std::unordered_map<std::uint64_t, std::vector<std::size_t>> words_with;  // may hold stale entries
    std::unordered_set<std::uint64_t> excluded;  // pairs whose concatenation is already a token

    const auto count_pairs = [&](std::size_t word_index, std::int64_t sign) {
        const WeightedWord& word = words[word_index];
        for (std::size_t k = 0; k + 1 < word.symbols.size(); ++k) {
            const std::int32_t left = word.symbols[k], right = word.symbols[k + 1];
            const std::uint64_t key = pair_key(left, right);
            if (excluded.contains(key)) continue;
            std::int64_t& count = counts[key];
            if (count > 0) candidates.erase({count, left, right});
            count += sign * word.count;
            if (count > 0) candidates.insert({count, left, right});
            if (sign > 0) words_with[key].push_back(word_index);
        }
    };
    for (std::size_t w = 0; w < words.size(); ++w) count_pairs(w, +1);

    std::vector<Merge> merges;
    while (merges.size() < wanted && !candidates.empty()) {
        const Candidate best = *candidates.begin();
        const std::uint64_t key = pair_key(best.left, best.right);
        std::string joined = symbols[best.left] + symbols[best.right];
        if (taken.contains(joined)) {
            candidates.erase(candidates.begin());
            excluded.insert(key);
            continue;
        }
        const auto merged = static_cast<std::int32_t>(symbols.size());
        merges.push_back({symbols[best.left], symbols[best.right]});
        taken.insert(joined);
        symbols.push_back(std::move(joined));

        std::vector<std::size_t> affected = std::move(words_with[key]);
        words_with.erase(key);
        std::sort(affected.begin(), affected.end());
        affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
        for (std::size_t w : affected) {
            std::vector<std::int32_t> after = words[w].symbols;
            if (!merge_pair(after, best.left, best.right, merged)) continue;
            count_pairs(w, -1);
            words[w].symbols = std::move(after);
            count_pairs(w, +1);
        }
    }
    return merges;
}

// ---------------------------------------------------------------------------------------------
// Vocabulary layout per style

// The ids of a tokenizer, in order: `leading` tokens (fixed, not trained), the trainer's `base`
// symbols, one token per merge, then the `trailing` special tokens (added tokens only).
struct VocabularyPlan {
    std::vector<std::string> leading;
    std::vector<std::string> base;
    std::vector<WeightedWord> words;
    std::vector<std::string> trailing;
};

std::vector<WeightedWord> weigh(const std::map<std::vector<std::int32_t>, std::int64_t>& counts) {
    std::vector<WeightedWord> words;
    for (const auto& [symbols, count] : counts) words.push_back({symbols, count});
    return words;
}

VocabularyPlan plan_byte_level(const TokenizerRequest& request, std::string_view text) {
    const ByteAlphabet alphabet = make_byte_alphabet();
    VocabularyPlan plan;
    std::array<std::int32_t, 256> index_of_byte{};
    for (unsigned char b : alphabet.bytes_in_id_order) {
        index_of_byte[b] = static_cast<std::int32_t>(plan.base.size());
        plan.base.push_back(alphabet.symbol_of_byte[b]);
    }
    std::map<std::vector<std::int32_t>, std::int64_t> counts;
    for (std::string_view piece : split_like_qwen2(text)) {
        std::vector<std::int32_t> symbols;
        for (char c : piece) symbols.push_back(index_of_byte[static_cast<unsigned char>(c)]);
        ++counts[symbols];
    }
    plan.words = weigh(counts);
    plan.trailing = request.special_tokens;
    return plan;
}

std::string byte_token(unsigned b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    return name;
}

VocabularyPlan plan_sentencepiece(const TokenizerRequest& request, std::string_view text) {
    const auto& specials = request.special_tokens;
    if (specials.size() < sentencepiece_leading_specials.size() ||
        !std::equal(sentencepiece_leading_specials.begin(), sentencepiece_leading_specials.end(), specials.begin()))
        fail("sentencepiece_bpe tokenizers need special tokens starting with \"<unk>\", \"<s>\", \"</s>\"",
             "they take ids 0, 1, 2 as in Llama-2 and Mixtral");

    VocabularyPlan plan;
    plan.leading.assign(specials.begin(), specials.begin() + sentencepiece_leading_specials.size());
    for (unsigned b = 0; b < 256; ++b) plan.leading.push_back(byte_token(b));
    plan.trailing.assign(specials.begin() + sentencepiece_leading_specials.size(), specials.end());

    const std::string normalized = normalize_metaspace(text);
    const std::vector<std::vector<CodePoint>> words = split_metaspace_words(normalized);
    std::set<std::string_view> characters;  // bytewise order == code point order
    for (const auto& word : words)
        for (const CodePoint& cp : word) characters.insert(cp.bytes);
    std::map<std::string_view, std::int32_t> index_of;
    for (std::string_view c : characters) {
        index_of.emplace(c, static_cast<std::int32_t>(plan.base.size()));
        plan.base.emplace_back(c);
    }
    std::map<std::vector<std::int32_t>, std::int64_t> counts;
    for (const auto& word : words) {
        std::vector<std::int32_t> symbols;
        for (const CodePoint& cp : word) symbols.push_back(index_of.at(cp.bytes));
        ++counts[symbols];
    }
    plan.words = weigh(counts);
    return plan;
}

void check_special_tokens(const TokenizerRequest& request) {
    std::set<std::string> seen;
    for (const std::string& token : request.special_tokens) {
        if (token.empty()) fail("special tokens must not be empty");
        if (!seen.insert(token).second) fail("special token \"" + token + "\" is listed twice");
    }
    for (const std::string* role : {&request.bos_token, &request.eos_token})
        if (!role->empty() && !seen.contains(*role))
            fail("bos/eos token \"" + *role + "\" is not one of the special tokens");
}

// ---------------------------------------------------------------------------------------------
// JSON text

// Two-space indentation like serde_json's pretty printer (how `tokenizers` saves
// tokenizer.json); empty containers stay on one line.
void write_pretty(std::string& out, const json::value& value, int depth) {
    const auto newline = [&](int level) {
        out += '\n';
        out.append(static_cast<std::size_t>(level) * 2, ' ');
    };
    if (const json::object* object = value.if_object(); object && !object->empty()) {
        out += '{';
        bool first = true;
        for (const auto& [key, member] : *object) {
            if (!first) out += ',';
            first = false;
            newline(depth + 1);
            out += json::serialize(json::string_view(key));
            out += ": ";
            write_pretty(out, member, depth + 1);
        }
        newline(depth);
        out += '}';
    } else if (const json::array* array = value.if_array(); array && !array->empty()) {
        out += '[';
        bool first = true;
        for (const json::value& element : *array) {
            if (!first) out += ',';
            first = false;
            newline(depth + 1);
            write_pretty(out, element, depth + 1);
        }
        newline(depth);
        out += ']';
    } else {
        out += json::serialize(value);
    }
}

std::string pretty(const json::value& value) {
    std::string out;
    write_pretty(out, value, 0);
    out += '\n';
    return out;
}

struct AddedToken {
    std::int64_t id;
    std::string content;
};

// The AddedToken flags shared by every special token here (as the families' files have them).
json::object added_token_flags(const std::string& content) {
    return {{"content", content}, {"lstrip", false}, {"normalized", false}, {"rstrip", false}, {"single_word", false}};
}

json::object byte_level_component(std::string_view type) {
    return {{"type", type}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
}

json::object string_pattern(std::string_view pattern) { return {{"String", pattern}}; }

json::object bpe_model(const std::vector<std::string>& vocab, const std::vector<Merge>& merges, bool sentencepiece) {
    json::object vocab_json;
    vocab_json.reserve(vocab.size());
    for (std::size_t id = 0; id < vocab.size(); ++id) vocab_json.emplace(vocab[id], static_cast<std::int64_t>(id));
    // The "left right" string form, which every tokenizers version reads; no token holds a
    // ' ' (spaces are "Ġ" or "▁" here), so it is unambiguous.
    json::array merges_json;
    merges_json.reserve(merges.size());
    for (const Merge& merge : merges) merges_json.emplace_back(merge.left + " " + merge.right);

    json::object model;
    model["type"] = "BPE";
    model["dropout"] = nullptr;
    model["unk_token"] = sentencepiece ? json::value("<unk>") : json::value(nullptr);
    model["continuing_subword_prefix"] = nullptr;
    model["end_of_word_suffix"] = nullptr;
    model["fuse_unk"] = sentencepiece;
    model["byte_fallback"] = sentencepiece;
    model["ignore_merges"] = false;
    model["vocab"] = std::move(vocab_json);
    model["merges"] = std::move(merges_json);
    return model;
}

json::value sentencepiece_post_processor(const std::string& bos_token, std::int64_t bos_id) {
    if (bos_token.empty()) return nullptr;
    const auto special = [&](int type_id) {
        return json::object{{"SpecialToken", json::object{{"id", bos_token}, {"type_id", type_id}}}};
    };
    const auto sequence = [](std::string_view id, int type_id) {
        return json::object{{"Sequence", json::object{{"id", id}, {"type_id", type_id}}}};
    };
    json::object tokens;
    tokens[bos_token] = json::object{{"id", bos_token}, {"ids", json::array{bos_id}}, {"tokens", json::array{bos_token}}};
    return json::object{{"type", "TemplateProcessing"},
                        {"single", json::array{special(0), sequence("A", 0)}},
                        {"pair", json::array{special(0), sequence("A", 0), special(1), sequence("B", 1)}},
                        {"special_tokens", std::move(tokens)}};
}

std::string tokenizer_json(const TokenizerRequest& request, const std::vector<std::string>& vocab,
                           const std::vector<Merge>& merges, const std::vector<AddedToken>& added,
                           std::int64_t bos_id) {
    const bool sentencepiece = request.style == TokenizerStyle::sentencepiece_bpe;
    json::array added_json;
    for (const AddedToken& token : added) {
        added_json.emplace_back(json::object{{"id", token.id},
                                             {"content", token.content},
                                             {"single_word", false},
                                             {"lstrip", false},
                                             {"rstrip", false},
                                             {"normalized", false},
                                             {"special", true}});
    }

    json::object root;
    root["version"] = "1.0";
    root["truncation"] = nullptr;
    root["padding"] = nullptr;
    root["added_tokens"] = std::move(added_json);
    if (sentencepiece) {
        root["normalizer"] = json::object{
            {"type", "Sequence"},
            {"normalizers",
             json::array{json::object{{"type", "Prepend"}, {"prepend", metaspace}},
                         json::object{{"type", "Replace"}, {"pattern", string_pattern(" ")}, {"content", metaspace}}}}};
        root["pre_tokenizer"] = nullptr;
        root["post_processor"] = sentencepiece_post_processor(request.bos_token, bos_id);
        root["decoder"] = json::object{
            {"type", "Sequence"},
            {"decoders",
             json::array{json::object{{"type", "Replace"}, {"pattern", string_pattern(metaspace)}, {"content", " "}},
                         json::object{{"type", "ByteFallback"}}, json::object{{"type", "Fuse"}},
                         json::object{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
    } else {
        root["normalizer"] = json::object{{"type", "NFC"}};
        root["pre_tokenizer"] = json::object{
            {"type", "Sequence"},
            {"pretokenizers",
             json::array{json::object{{"type", "Split"},
                                      {"pattern", json::object{{"Regex", qwen2_split_regex}}},
                                      {"behavior", "Isolated"},
                                      {"invert", false}},
                         byte_level_component("ByteLevel")}}};
        root["post_processor"] = byte_level_component("ByteLevel");
        root["decoder"] = byte_level_component("ByteLevel");
    }
    root["model"] = bpe_model(vocab, merges, sentencepiece);
    return pretty(root);
}

json::value token_or_null(const std::string& token) {
    return token.empty() ? json::value(nullptr) : json::value(token);
}

// Keys in alphabetical order, as transformers' save_pretrained writes them.
std::string tokenizer_config_json(const TokenizerRequest& request, const std::vector<AddedToken>& added) {
    const bool sentencepiece = request.style == TokenizerStyle::sentencepiece_bpe;
    json::object decoder;
    for (const AddedToken& token : added) {
        json::object entry = added_token_flags(token.content);
        entry["special"] = true;
        decoder[std::to_string(token.id)] = std::move(entry);
    }
    json::array additional;
    for (const AddedToken& token : added)
        if (token.content != request.bos_token && token.content != request.eos_token && token.content != "<unk>")
            additional.emplace_back(token.content);

    json::object config;
    if (sentencepiece) {
        config["add_bos_token"] = !request.bos_token.empty();
        config["add_eos_token"] = false;
    }
    config["added_tokens_decoder"] = std::move(decoder);
    if (!additional.empty()) config["additional_special_tokens"] = std::move(additional);
    config["bos_token"] = token_or_null(request.bos_token);
    if (!request.chat_template.empty()) config["chat_template"] = request.chat_template;
    config["clean_up_tokenization_spaces"] = false;
    config["eos_token"] = token_or_null(request.eos_token);
    // legacy=true keeps transformers(.js) from swapping the normalizer for a Metaspace pre-tokenizer.
    if (sentencepiece) config["legacy"] = true;
    config["model_max_length"] = sentencepiece ? 32768 : 131072;
    config["pad_token"] = nullptr;
    if (sentencepiece) {
        config["sp_model_kwargs"] = json::object{};
        config["spaces_between_special_tokens"] = false;
    }
    // No tokenizer.model is written, so the sentencepiece style names the fast class.
    config["tokenizer_class"] = sentencepiece ? "LlamaTokenizerFast" : "PreTrainedTokenizerFast";
    config["unk_token"] = sentencepiece ? json::value("<unk>") : json::value(nullptr);
    if (sentencepiece) config["use_default_system_prompt"] = false;
    return pretty(config);
}

std::string special_tokens_map_json(const TokenizerRequest& request, const std::vector<AddedToken>& added) {
    json::object map;
    json::array additional;
    for (const AddedToken& token : added)
        if (token.content != request.bos_token && token.content != request.eos_token && token.content != "<unk>")
            additional.emplace_back(token.content);
    if (!additional.empty()) map["additional_special_tokens"] = std::move(additional);
    if (!request.bos_token.empty()) map["bos_token"] = added_token_flags(request.bos_token);
    if (!request.eos_token.empty()) map["eos_token"] = added_token_flags(request.eos_token);
    if (request.style == TokenizerStyle::sentencepiece_bpe) map["unk_token"] = added_token_flags("<unk>");
    return pretty(map);
}

}  // namespace

SynthTokenizer make_synth_tokenizer(const TokenizerRequest& request) {
    check_special_tokens(request);
    const std::string_view text = embedded_text();
    const bool sentencepiece = request.style == TokenizerStyle::sentencepiece_bpe;
    VocabularyPlan plan = sentencepiece ? plan_sentencepiece(request, text) : plan_byte_level(request, text);

    std::set<std::string> fixed_tokens(plan.leading.begin(), plan.leading.end());
    fixed_tokens.insert(plan.base.begin(), plan.base.end());
    for (const std::string& token : plan.trailing)
        if (fixed_tokens.contains(token))
            fail("special token \"" + token + "\" is also an ordinary token of the vocabulary");

    const auto fixed_count = static_cast<std::int64_t>(plan.leading.size() + plan.base.size() + plan.trailing.size());
    const std::string style_name = sentencepiece ? "sentencepiece_bpe" : "byte_level_bpe";
    if (request.vocab_size < fixed_count)
        fail("vocab_size " + std::to_string(request.vocab_size) + " is too small for a " + style_name +
                 " tokenizer: its base symbols and special tokens take " + std::to_string(fixed_count) + " ids",
             "use vocab_size >= " + std::to_string(fixed_count));

    const auto wanted = static_cast<std::size_t>(request.vocab_size - fixed_count);
    std::set<std::string> reserved(plan.trailing.begin(), plan.trailing.end());
    reserved.insert(plan.leading.begin(), plan.leading.end());
    const std::vector<Merge> merges = train_bpe(plan.base, std::move(plan.words), wanted, reserved);
    if (merges.size() < wanted) {
        const std::int64_t largest = fixed_count + static_cast<std::int64_t>(merges.size());
        fail("vocab_size " + std::to_string(request.vocab_size) + " is too large for a " + style_name +
                 " tokenizer trained on the embedded text: it yields at most " + std::to_string(largest) + " ids",
             "use vocab_size <= " + std::to_string(largest));
    }

    std::vector<std::string> vocab = std::move(plan.leading);
    vocab.insert(vocab.end(), plan.base.begin(), plan.base.end());
    for (const Merge& merge : merges) vocab.push_back(merge.left + merge.right);

    // Sentencepiece's leading specials are model tokens that are also added tokens.
    std::vector<AddedToken> added;
    if (sentencepiece)
        for (std::size_t id = 0; id < sentencepiece_leading_specials.size(); ++id)
            added.push_back({static_cast<std::int64_t>(id), vocab[id]});
    auto next_id = static_cast<std::int64_t>(vocab.size());
    for (const std::string& token : plan.trailing) added.push_back({next_id++, token});

    SynthTokenizer result;
    result.vocab_size = request.vocab_size;
    for (const AddedToken& token : added) {
        if (token.content == request.bos_token) result.bos_token_id = token.id;
        if (token.content == request.eos_token) result.eos_token_id = token.id;
    }
    result.tokenizer_json = tokenizer_json(request, vocab, merges, added, result.bos_token_id);
    result.tokenizer_config_json = tokenizer_config_json(request, added);
    result.special_tokens_map_json = special_tokens_map_json(request, added);
    return result;
}

}  // namespace moequant::adapters
