#include "checkpoint/weight_catalog.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>

#include <algorithm>

namespace moequant {

void WeightCatalog::use_encodings(std::vector<const SourceEncoding*> encodings) {
    std::scoped_lock lock(cache_mutex_, claims_mutex_);
    encodings_ = std::move(encodings);
    cache_.clear();
    unrecognised_.clear();
    claims_ready_ = false;
    claimants_.clear();
    claims_.clear();
}

const ModelConfig* WeightCatalog::config(const Checkpoint& owner) {
    std::call_once(config_loaded_, [this, &owner] {
        if (owner.has_config()) config_ = owner.config();
    });
    return config_ ? &*config_ : nullptr;
}

// Which weights the stored tensors say they belong to, by the encodings' suffix rules. A claim
// is only a candidate: weight() decides, and holding() checks the tensor is really used.
void WeightCatalog::build_claims(const Checkpoint& owner) {
    std::lock_guard lock(claims_mutex_);
    if (claims_ready_) return;
    {
        for (const auto& name : owner.tensor_names()) {
            const TensorInfo& info = owner.info(name);
            for (const SourceEncoding* e : encodings_) {
                auto weight = e->weight_of(info);
                if (!weight || *weight == name) continue;
                auto& tensors = claimants_[*weight];
                if (std::find(tensors.begin(), tensors.end(), name) == tensors.end()) tensors.push_back(name);
                auto& weights = claims_[name];
                if (std::find(weights.begin(), weights.end(), *weight) == weights.end()) weights.push_back(*weight);
            }
        }
    }
    claims_ready_ = true;
}

namespace {

std::string file_of(const Checkpoint& owner, const std::string& tensor) {
    if (owner.contains(tensor)) return (owner.directory() / owner.shard_of(tensor)).string();
    return (owner.index_path() ? *owner.index_path() : owner.directory()).string();
}

}  // namespace

void WeightCatalog::unsupported(const Checkpoint& owner, const std::string& name) const {
    std::string found;
    auto describe = [&](const std::string& tensor) {
        const TensorInfo& info = owner.info(tensor);
        found += (found.empty() ? "" : ", ") + tensor + " " + std::string(dtype_name(info.dtype)) + " " +
                 shape_to_string(info.shape);
    };
    if (owner.contains(name)) describe(name);
    if (auto it = claimants_.find(name); it != claimants_.end())
        for (const auto& t : it->second) describe(t);
    std::string installed;
    for (const SourceEncoding* e : encodings_) installed += (installed.empty() ? "" : ", ") + std::string(e->id());
    throw Error(ErrorKind::input,
                "no installed encoding can decode this weight (tensors: " + found + ")",
                {.file = file_of(owner, owner.contains(name) ? name : claimants_.count(name) ? claimants_.at(name).front() : name),
                 .tensor = name,
                 .code = "UnsupportedEncoding",
                 .hint = installed.empty() ? "no encoding plugins are loaded (moequant plugins --all)"
                                           : "installed encodings: " + installed});
}

// What an encoding filled in must describe tensors that exist and a shape decode() can serve.
void WeightCatalog::check_recognised(const Checkpoint& owner, const std::string& name, const SourceEncoding& encoding, EncodedWeight& w) const {
    auto bad = [&](const std::string& why) {
        throw Error(ErrorKind::plugin, "encoding '" + std::string(encoding.id()) + "' recognised the weight but " + why,
                    {.tensor = name, .plugin = std::string(encoding.id()), .code = "InvalidEncodedWeight"});
    };
    if (w.tensors.empty()) bad("named none of its tensors");
    for (const auto& [role, tensor] : w.tensors)
        if (!owner.contains(tensor)) bad("named tensor '" + tensor + "', which the checkpoint does not hold");
    if (w.shape.empty() || w.shape.size() > 3 || !shape_elements(w.shape))
        bad("gave it the shape " + shape_to_string(w.shape));
    for (std::int64_t d : w.shape)
        if (d < 0) bad("gave it the shape " + shape_to_string(w.shape));
    w.name = name;
    w.decoder = &encoding;
    if (w.encoding.empty()) w.encoding = std::string(encoding.id());
    if (w.stored_bytes == 0)
        for (const auto& [role, tensor] : w.tensors) w.stored_bytes += owner.info(tensor).size_bytes();
}

std::unique_ptr<EncodedWeight> WeightCatalog::recognise(const Checkpoint& owner, const std::string& name, bool quiet) {
    build_claims(owner);
    const bool exists = owner.contains(name), claimed = claimants_.count(name) != 0;
    if (!exists && !claimed) return nullptr;
    const ModelConfig* cfg = config(owner);
    int best = 0;
    const SourceEncoding* winner = nullptr;
    const SourceEncoding* tied = nullptr;
    EncodedWeight chosen;
    for (const SourceEncoding* e : encodings_) {
        EncodedWeight candidate;
        const int score = e->recognise(name, owner, cfg, candidate);
        if (score <= 0) continue;
        if (score > best) {
            best = score;
            winner = e;
            tied = nullptr;
            chosen = std::move(candidate);
        } else if (score == best) {
            tied = e;
        }
    }
    if (!winner) {
        if (quiet) return nullptr;
        unsupported(owner, name);
    }
    if (tied)
        throw Error(ErrorKind::input,
                    "encodings '" + std::string(winner->id()) + "' and '" + std::string(tied->id()) +
                        "' both claim this weight equally",
                    {.file = file_of(owner, exists ? name : claimants_.at(name).front()),
                     .tensor = name,
                     .code = "AmbiguousEncoding",
                     .hint = "remove one of the two encoding plugins from the plugin folders"});
    check_recognised(owner, name, *winner, chosen);
    return std::make_unique<EncodedWeight>(std::move(chosen));
}

const EncodedWeight* WeightCatalog::find(const Checkpoint& owner, std::string_view name) {
    std::lock_guard lock(cache_mutex_);
    std::string key(name);
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, recognise(owner, key, false)).first;
    return it->second.get();
}

// As find(), but a tensor no encoding recognises is no error: holding() asks about every tensor.
const EncodedWeight* WeightCatalog::find_quietly(const Checkpoint& owner, const std::string& name) {
    std::lock_guard lock(cache_mutex_);
    if (auto it = cache_.find(name); it != cache_.end()) return it->second.get();
    if (unrecognised_.count(name)) return nullptr;
    auto w = recognise(owner, name, true);
    if (!w) {
        unrecognised_.insert(name);
        return nullptr;
    }
    return cache_.emplace(name, std::move(w)).first->second.get();
}

const EncodedWeight& WeightCatalog::require(const Checkpoint& owner, std::string_view name) {
    if (const EncodedWeight* w = find(owner, name)) return *w;
    throw Error(ErrorKind::input, "the checkpoint has no tensor of this weight",
                {.file = file_of(owner, std::string(name)), .tensor = std::string(name), .code = "TensorNotFound"});
}

const EncodedWeight* WeightCatalog::holding(const Checkpoint& owner, std::string_view tensor) {
    build_claims(owner);
    auto uses = [&](const EncodedWeight& w) {
        for (const auto& [role, t] : w.tensors)
            if (t == tensor) return true;
        return std::find(w.ignored.begin(), w.ignored.end(), tensor) != w.ignored.end();
    };
    if (auto it = claims_.find(std::string(tensor)); it != claims_.end())
        for (const auto& weight : it->second)
            if (const EncodedWeight* w = find(owner, weight); w && uses(*w)) return w;
    if (const EncodedWeight* w = find_quietly(owner, std::string(tensor)); w && uses(*w)) return w;
    return nullptr;
}

}  // namespace moequant
