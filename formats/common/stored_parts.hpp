// Helpers the kt formats' readers share: a map from StoredPartKey to where each of its tensors
// ("weight", "scale") is stored, filled while listing an output. Header-only.
#pragma once

#include "kt_naming.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/output_format.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace moequant::formats {

// (part key) -> (tensor name "weight"/"scale") -> location of its bytes (a tensor name or a file).
using StoredPartIndex = std::map<StoredPartKey, std::map<std::string, std::string>>;

inline std::vector<StoredPartKey> keys_of(const StoredPartIndex& index) {
    std::vector<StoredPartKey> keys;
    keys.reserve(index.size());
    for (const auto& [key, tensors] : index) keys.push_back(key);
    return keys;
}

// Reads one part: load(tensor, where) gives, for each of its tensors ("weight", "scale") at
// `where` in the index, its location for messages and its bytes.
template <class Load>
StoredPart read_stored_part(const StoredPartIndex& index, const StoredPartKey& key, const Options& recorded, Load&& load) {
    StoredPart out{key, {}, {}};
    out.tensor.method = recorded.get_string("method", "");
    for (const auto& [tensor, where] : index.at(key)) {
        auto [location, bytes] = load(tensor, where);
        if (!out.location.empty()) out.location += ", ";
        out.location += location;
        out.tensor.parts.emplace_back(tensor, std::move(bytes));
    }
    return out;
}

// The recorded method of an output whose kt method or file prefix is `method`. The quantizer is
// recorded only where the output names it (record_shard_metadata(), the run manifest); else
// verify finds the one that publishes this method as its kt method or file prefix
// (method_fact_keys, output_quantizer()).
inline void record_method(Options& recorded, const std::string& method) {
    recorded.set("method", kt_method_of(method));
    recorded.set("method_fact_keys", "kt.method,kt.file_prefix");
}

// An output holding kt's backward weights (any part with a "backward." tensor) records
// backward_weights, which binds the quantizer verify reads it with to expect them everywhere.
inline void record_backward_weights(Options& recorded, const StoredPartIndex& index) {
    for (const auto& [key, tensors] : index)
        for (const auto& [tensor, where] : tensors)
            if (kt_part_name(tensor).backward) return recorded.set("backward_weights", "true");
}

// What moequant's shards record about the job in __metadata__ (the reference converter's record
// nothing): quantizer, parts, experts, source, and for a calibrated output its data.
inline void record_shard_metadata(Options& recorded, const SafetensorsFile& shard) {
    for (const char* key : {"quantizer", "parts", "experts", "source", "calibration"})
        if (auto value = shard.metadata(std::string("moequant.") + key)) recorded.set(key, *value);
}

// An output stored as a sharded safetensors checkpoint: each part's tensors are tensors of it,
// read as "shard:tensor". A format derives from it to run its runtime checks.
class CheckpointPartReader : public OutputReader {
public:
    CheckpointPartReader(Checkpoint checkpoint, StoredPartIndex index, Options recorded)
        : checkpoint_(std::move(checkpoint)), index_(std::move(index)), recorded_(std::move(recorded)) {}

    Options recorded() const override { return recorded_; }
    std::vector<StoredPartKey> parts() const override { return keys_of(index_); }
    StoredPart read(const StoredPartKey& key) const override {
        return read_stored_part(index_, key, recorded_, [&](const std::string&, const std::string& name) {
            return std::pair{checkpoint_.shard_of(name) + ":" + name, Tensor::copy_of(checkpoint_.view(name))};
        });
    }

private:
    Checkpoint checkpoint_;
    StoredPartIndex index_;
    Options recorded_;
};

}  // namespace moequant::formats
