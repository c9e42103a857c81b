#include "bpe_model.hpp"

#include "json_fields.hpp"

#include <cstdio>
#include <queue>

namespace moequant::tokenization {

namespace {

std::size_t utf8_length(unsigned char lead) {
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

}  // namespace

BpeModel::BpeModel(const boost::json::value& json) {
    const std::string type = type_of(json, "model");
    if (type != "BPE") bad_tokenizer("model '" + type + "' is not supported (BPE only)");
    const auto& o = json.get_object();
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
        if (!string_field(o, key, "model").empty()) bad_tokenizer(std::string("model.") + key + " is not supported");
    if (const auto* d = o.if_contains("dropout"); d && !d->is_null() && d->to_number<double>() != 0.0)
        bad_tokenizer("model.dropout is not supported (calibration needs deterministic ids)");
    byte_fallback_ = bool_field(o, "byte_fallback", false);
    fuse_unk_ = bool_field(o, "fuse_unk", false);
    ignore_merges_ = bool_field(o, "ignore_merges", false);

    const auto* vocab = o.if_contains("vocab");
    if (!vocab || !vocab->is_object()) bad_tokenizer("model.vocab must be an object");
    vocab_.reserve(vocab->get_object().size());
    for (const auto& kv : vocab->get_object()) {
        if (!kv.value().is_int64()) bad_tokenizer("model.vocab['" + std::string(kv.key()) + "'] is not an integer id");
        const auto id = static_cast<std::int32_t>(kv.value().get_int64());
        vocab_.emplace(std::string(kv.key()), id);
        max_id_ = std::max(max_id_, id);
    }
    const std::string unk = string_field(o, "unk_token", "model");
    if (!unk.empty()) {
        auto it = vocab_.find(unk);
        if (it == vocab_.end()) bad_tokenizer("model.unk_token '" + unk + "' is not in the vocabulary");
        unk_ = it->second;
    }
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        auto it = vocab_.find(name);
        byte_tokens_[b] = it == vocab_.end() ? -1 : it->second;
    }

    const auto* merges = o.if_contains("merges");
    if (!merges || !merges->is_array()) bad_tokenizer("model.merges must be a list");
    std::int32_t rank = 0;
    merges_.reserve(merges->get_array().size());
    for (const auto& m : merges->get_array()) {
        std::string a, b;
        if (m.is_string()) {  // "left right"
            const std::string_view s = m.get_string();
            const std::size_t space = s.find(' ', 1);
            if (space == std::string_view::npos) bad_tokenizer("merge '" + std::string(s) + "' is not two tokens");
            a = s.substr(0, space);
            b = s.substr(space + 1);
        } else if (m.is_array() && m.get_array().size() == 2 && m.get_array()[0].is_string() && m.get_array()[1].is_string()) {
            a = m.get_array()[0].get_string();
            b = m.get_array()[1].get_string();
        } else {
            bad_tokenizer("merge #" + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
        }
        auto ia = vocab_.find(a), ib = vocab_.find(b), ir = vocab_.find(a + b);
        if (ia == vocab_.end() || ib == vocab_.end() || ir == vocab_.end())
            bad_tokenizer("merge '" + a + " " + b + "' names a token that is not in the vocabulary");
        merges_.emplace(pair_key(ia->second, ib->second), Merge{rank, ir->second});  // the first rank of a pair wins
        ++rank;
    }
}

std::optional<std::int32_t> BpeModel::id(std::string_view token) const {
    auto it = vocab_.find(std::string(token));
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges_)
        if (auto whole = vocab_.find(std::string(word)); whole != vocab_.end()) {
            out.push_back(whole->second);
            return;
        }
    // Symbols in a doubly linked list over their initial positions.
    struct Symbol {
        std::int32_t id;
        std::int32_t prev, next;
        bool alive, unknown;
    };
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    auto push = [&](std::int32_t id, bool unknown) {
        const auto n = static_cast<std::int32_t>(symbols.size());
        symbols.push_back({id, n - 1, n + 1, true, unknown});
    };
    for (std::size_t at = 0; at < word.size();) {
        const std::size_t len = std::min(utf8_length(static_cast<unsigned char>(word[at])), word.size() - at);
        const std::string ch(word.substr(at, len));
        at += len;
        if (auto it = vocab_.find(ch); it != vocab_.end()) {
            push(it->second, false);
            continue;
        }
        if (byte_fallback_) {
            bool all = true;
            for (unsigned char b : ch) all = all && byte_tokens_[b] >= 0;
            if (all) {
                for (unsigned char b : ch) push(byte_tokens_[b], false);
                continue;
            }
        }
        if (!unk_) continue;  // no unknown token: the character is dropped, as the reference does
        if (fuse_unk_ && !symbols.empty() && symbols.back().unknown) continue;
        push(*unk_, true);
    }
    if (symbols.empty()) return;
    symbols.back().next = -1;

    // Candidate merges, lowest rank first, then leftmost; stale entries are skipped on pop.
    struct Candidate {
        std::int32_t rank, left, right, result;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    auto consider = [&](std::int32_t left) {
        if (left < 0) return;
        const std::int32_t right = symbols[left].next;
        if (right < 0) return;
        auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
        if (it != merges_.end()) queue.push({it->second.rank, left, right, it->second.result});
    };
    for (std::int32_t i = 0; i < static_cast<std::int32_t>(symbols.size()); ++i) consider(i);
    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& l = symbols[c.left];
        if (!l.alive || l.next != c.right || !symbols[c.right].alive) continue;
        auto it = merges_.find(pair_key(l.id, symbols[c.right].id));
        if (it == merges_.end() || it->second.result != c.result) continue;
        Symbol& r = symbols[c.right];
        l.id = c.result;
        l.unknown = false;
        r.alive = false;
        l.next = r.next;
        if (r.next >= 0) symbols[r.next].prev = c.left;
        consider(l.prev);
        consider(c.left);
    }
    for (std::int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace moequant::tokenization
