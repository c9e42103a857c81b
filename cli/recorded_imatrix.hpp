// `record --imatrix FILE`: the experts' statistics measured layer by layer
// (expert_importance_statistics.hpp), gathered into llama.cpp's importance matrix file as
// llama-imatrix writes it for the stacked expert tensors blk.L.ffn_{gate,up,down}_exps.weight
// (the names convert --format gguf writes): the GGUF form, or the legacy form for a .dat file
// (docs/gguf-imatrix.md). Attention and dense tensors are not measured, so the file has no
// entry for them.
#pragma once

#include <moequant/engine/expert_importance_statistics.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace moequant::formats {
struct ImatrixRecord;
}

namespace moequant::cli {

// Which form a path asks for: the legacy .dat form by its extension, else GGUF (as
// llama-imatrix's --output-format dat|gguf).
bool wants_legacy_imatrix(const std::filesystem::path& path);

class RecordedImatrix {
public:
    // `experts`: the routed experts of every MoE layer (the stacked tensors' matrices).
    explicit RecordedImatrix(std::int64_t experts);
    ~RecordedImatrix();
    RecordedImatrix(const RecordedImatrix&) = delete;
    RecordedImatrix& operator=(const RecordedImatrix&) = delete;

    // Adds layer `layer`'s three entries; returns the experts that saw no token (ascending ids).
    // Error(input, NonFiniteImatrix) naming the entry and expert for a sum that is not finite.
    std::vector<std::int64_t> add_layer(std::int64_t layer, const std::vector<ExpertStatistics>& experts);

    // Writes the file (complete or not at all): `dataset` as llama-imatrix's dataset name,
    // `chunks` of `chunk_size` tokens as its chunk keys.
    void write(const std::filesystem::path& path, const std::string& dataset, std::uint32_t chunks, std::uint32_t chunk_size);

    std::size_t entries() const;

private:
    std::int64_t experts_;
    std::unique_ptr<formats::ImatrixRecord> record_;
};

// "layer 3: no calibration token was routed to expert(s) 5, 17" with at most 16 ids.
std::string unseen_experts_sentence(std::int64_t layer, const std::vector<std::int64_t>& unseen);

}  // namespace moequant::cli
