// The weights of a checkpoint as its encodings see them: which tensors claim to belong to which
// weight (built once from the headers), and each weight's recognition, cached. Private to the
// SDK; Checkpoint::weight() and friends forward here.
#pragma once

#include <moequant/model_config.hpp>
#include <moequant/source_encoding.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace moequant {

class Checkpoint;

class WeightCatalog {
public:
    void use_encodings(std::vector<const SourceEncoding*> encodings);
    const std::vector<const SourceEncoding*>& encodings() const noexcept { return encodings_; }

    // `owner` is the checkpoint holding this catalog (passed in, since checkpoints move).
    const EncodedWeight* find(const Checkpoint& owner, std::string_view name);
    const EncodedWeight& require(const Checkpoint& owner, std::string_view name);
    const EncodedWeight* holding(const Checkpoint& owner, std::string_view tensor);

private:
    const ModelConfig* config(const Checkpoint& owner);
    void build_claims(const Checkpoint& owner);
    std::unique_ptr<EncodedWeight> recognise(const Checkpoint& owner, const std::string& name, bool quiet);
    const EncodedWeight* find_quietly(const Checkpoint& owner, const std::string& name);
    void check_recognised(const Checkpoint& owner, const std::string& name, const SourceEncoding& encoding,
                          EncodedWeight& weight) const;
    [[noreturn]] void unsupported(const Checkpoint& owner, const std::string& name) const;

    std::vector<const SourceEncoding*> encodings_;

    std::once_flag config_loaded_;
    std::optional<ModelConfig> config_;

    std::mutex claims_mutex_;  // claims are built on first use, after use_encodings()
    bool claims_ready_ = false;
    std::unordered_map<std::string, std::vector<std::string>> claimants_;  // weight -> tensors claiming it
    std::unordered_map<std::string, std::vector<std::string>> claims_;     // tensor -> weights it claims

    std::mutex cache_mutex_;
    std::unordered_map<std::string, std::unique_ptr<EncodedWeight>> cache_;  // null: no such weight
    std::unordered_set<std::string> unrecognised_;  // tensors find_quietly() found no encoding for
};

}  // namespace moequant
