#include "recorded_imatrix.hpp"

#include "gguf_expert_tensor_name.hpp"
#include "gguf_imatrix.hpp"

#include <moequant/error.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <span>

namespace moequant::cli {

namespace fs = std::filesystem;

bool wants_legacy_imatrix(const fs::path& path) {
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return ext == ".dat";
}

RecordedImatrix::RecordedImatrix(std::int64_t experts) : experts_(experts), record_(std::make_unique<formats::ImatrixRecord>()) {}
RecordedImatrix::~RecordedImatrix() = default;

namespace {

// One stacked tensor's entry: every expert's statistics at its id, as F32 (llama-imatrix's
// file stores its sums and counts as F32).
formats::ImatrixStatistics entry(const std::string& name, std::int64_t experts, const std::vector<ExpertStatistics>& stats,
                                 const ColumnStatistics ExpertStatistics::*which) {
    const auto cols = static_cast<std::int64_t>((stats.front().*which).squares.size());
    formats::ImatrixStatistics out{.name = name, .cols = cols};
    const auto size = static_cast<std::size_t>(experts * cols);
    out.sums.assign(size, 0.0f);
    out.input_sums.assign(size, 0.0f);
    out.counts.assign(static_cast<std::size_t>(experts), 0.0f);
    for (const ExpertStatistics& e : stats) {
        const ColumnStatistics& s = e.*which;
        if (e.expert < 0 || e.expert >= experts || static_cast<std::int64_t>(s.squares.size()) != cols)
            throw Error(ErrorKind::internal, "expert " + std::to_string(e.expert) + " does not fit the imatrix entry " + name);
        const auto at = static_cast<std::size_t>(e.expert * cols);
        std::transform(s.squares.begin(), s.squares.end(), out.sums.begin() + static_cast<std::ptrdiff_t>(at),
                       [](double v) { return static_cast<float>(v); });
        std::transform(s.sums.begin(), s.sums.end(), out.input_sums.begin() + static_cast<std::ptrdiff_t>(at),
                       [](double v) { return static_cast<float>(v); });
        out.counts[static_cast<std::size_t>(e.expert)] = static_cast<float>(s.tokens);
        // llama-imatrix stops on a non-finite sum, and llama-quantize refuses such a file.
        const std::span<const float> written(out.sums.data() + at, static_cast<std::size_t>(cols));
        const auto bad = std::find_if(written.begin(), written.end(), [](float v) { return !std::isfinite(v); });
        if (bad != written.end())
            throw Error(ErrorKind::input, "the importance statistics of " + name + " are not finite (expert " + std::to_string(e.expert) +
                                              ", column " + std::to_string(bad - written.begin()) +
                                              "): the model's weights or activations overflow or hold NaN/Inf",
                        {.code = "NonFiniteImatrix"});
    }
    return out;
}

}  // namespace

std::vector<std::int64_t> RecordedImatrix::add_layer(std::int64_t layer, const std::vector<ExpertStatistics>& experts) {
    if (experts.empty()) return {};
    // gate and up see the same inputs: llama-imatrix records the same statistics for both.
    record_->weights.push_back(entry(formats::gguf_expert_tensor_name(layer, Projection::gate), experts_, experts, &ExpertStatistics::inputs));
    formats::ImatrixStatistics up = record_->weights.back();
    up.name = formats::gguf_expert_tensor_name(layer, Projection::up);
    record_->weights.push_back(std::move(up));
    record_->weights.push_back(
        entry(formats::gguf_expert_tensor_name(layer, Projection::down), experts_, experts, &ExpertStatistics::down_inputs));
    std::vector<std::int64_t> unseen;
    const std::vector<float>& counts = record_->weights.back().counts;
    for (std::size_t e = 0; e < counts.size(); ++e)
        if (counts[e] == 0.0f) unseen.push_back(static_cast<std::int64_t>(e));
    return unseen;
}

void RecordedImatrix::write(const fs::path& path, const std::string& dataset, std::uint32_t chunks, std::uint32_t chunk_size) {
    record_->datasets = {dataset};
    record_->chunk_count = chunks;
    record_->chunk_size = chunk_size;
    if (wants_legacy_imatrix(path)) formats::write_imatrix_legacy(path, *record_);
    else formats::write_imatrix_gguf(path, *record_);
}

std::size_t RecordedImatrix::entries() const { return record_->weights.size(); }

std::string unseen_experts_sentence(std::int64_t layer, const std::vector<std::int64_t>& unseen) {
    constexpr std::size_t named = 16;  // a long list is cut; the file's counts have all of them
    std::string list;
    for (std::size_t i = 0; i < std::min(unseen.size(), named); ++i) list += (i ? ", " : "") + std::to_string(unseen[i]);
    if (unseen.size() > named) list += ", ... (" + std::to_string(unseen.size()) + " in all)";
    return "layer " + std::to_string(layer) + ": no calibration token was routed to expert(s) " + list;
}

}  // namespace moequant::cli
