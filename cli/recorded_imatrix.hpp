// `record --imatrix FILE`: the experts' statistics measured layer by layer
// (expert_importance_statistics.hpp), gathered into llama.cpp's importance matrix file as
// llama-imatrix writes it for the stacked expert tensors blk.L.ffn_{gate,up,down}_exps.weight
// (the names convert --format gguf writes): the GGUF form, or the legacy form for a .dat file
// (docs/gguf-imatrix.md). Attention and dense tensors are not measured, so the file has no
// entry for them.
#pragma once

#include "spool_file.hpp"

#include <moequant/engine/expert_importance_statistics.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>


namespace moequant::cli {

// Which form a path asks for: the legacy .dat form by its extension, else GGUF (as
// llama-imatrix's --output-format dat|gguf).
bool wants_legacy_imatrix(const std::filesystem::path& path);

class RecordedImatrix {
public:
    // `experts`: the routed experts of every MoE layer (the stacked tensors' matrices); `path`: the
    // file write() will write (its form decides whether the input sums are kept). Each layer's
    // statistics wait in a spool file in `scratch_dir` until then, so memory holds one layer.
    RecordedImatrix(std::int64_t experts, std::filesystem::path path, const std::filesystem::path& scratch_dir);
    ~RecordedImatrix();
    RecordedImatrix(const RecordedImatrix&) = delete;
    RecordedImatrix& operator=(const RecordedImatrix&) = delete;

    // What the spool holds at most for `layers` MoE layers whose gate/up and down inputs have
    // `hidden` and `intermediate` columns (for the scratch folder's free-space check).
    static std::uint64_t spool_bytes(const std::filesystem::path& path, std::int64_t experts, std::int64_t layers, std::int64_t hidden,
                                     std::int64_t intermediate);

    // Adds layer `layer`'s three entries; returns the experts that saw no token (ascending ids).
    // Error(input, NonFiniteImatrix) naming the entry and expert for a sum that is not finite.
    std::vector<std::int64_t> add_layer(std::int64_t layer, const std::vector<ExpertStatistics>& experts);

    // Writes the file (complete or not at all): `dataset` as llama-imatrix's dataset name,
    // `chunks` of `chunk_size` tokens as its chunk keys.
    void write(const std::string& dataset, std::uint32_t chunks, std::uint32_t chunk_size);

    std::size_t entries() const { return entries_.size(); }

private:
    // One stacked tensor's entry: every expert's counts here, its sums (and input sums) in the
    // spool, [experts][cols] F32 each.
    struct Entry {
        std::string name;
        std::int64_t cols = 0;
        std::vector<float> counts;
        std::uint64_t sums_at = 0, input_sums_at = 0;
    };
    std::int64_t experts_;
    std::filesystem::path path_;
    bool input_sums_;
    std::unique_ptr<SpoolFile> spool_;
    std::vector<Entry> entries_;
};

// "layer 3: no calibration token was routed to expert(s) 5, 17" with at most 16 ids.
std::string unseen_experts_sentence(std::int64_t layer, const std::vector<std::int64_t>& unseen);

}  // namespace moequant::cli
