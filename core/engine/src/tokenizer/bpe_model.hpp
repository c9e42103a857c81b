// tokenizer.json "model" of type BPE: a vocabulary, ranked merges, and the rules for characters
// the vocabulary lacks (byte fallback to <0xXX> tokens, or the unknown token, optionally fused).
// A word is split into characters and the lowest-ranked adjacent pair is merged until none is
// left (leftmost first among equal pairs), as the reference library does.
#pragma once

#include <boost/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moequant::tokenization {

class BpeModel {
public:
    // Error(input) for another model type or an inconsistent vocabulary/merge list.
    explicit BpeModel(const boost::json::value& json);

    // Appends the ids of one pre-tokenized word.
    void encode_word(std::string_view word, std::vector<std::int32_t>& out) const;

    std::optional<std::int32_t> id(std::string_view token) const;
    std::int32_t max_id() const noexcept { return max_id_; }

private:
    struct Merge {
        std::int32_t rank;
        std::int32_t result;
    };
    static std::uint64_t pair_key(std::int32_t a, std::int32_t b) noexcept {
        return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
    }

    std::unordered_map<std::string, std::int32_t> vocab_;
    std::unordered_map<std::uint64_t, Merge> merges_;
    std::optional<std::int32_t> unk_;
    std::int32_t byte_tokens_[256];  // <0xXX> ids for byte fallback (-1 when absent)
    bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
    std::int32_t max_id_ = -1;
};

}  // namespace moequant::tokenization
