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

RecordedImatrix::RecordedImatrix(std::int64_t experts, fs::path path, const fs::path& scratch_dir)
    : experts_(experts), path_(std::move(path)), input_sums_(!wants_legacy_imatrix(path_)),
      spool_(std::make_unique<SpoolFile>(scratch_dir / "imatrix.spool")) {}
RecordedImatrix::~RecordedImatrix() = default;

std::uint64_t RecordedImatrix::spool_bytes(const fs::path& path, std::int64_t experts, std::int64_t layers, std::int64_t hidden,
                                           std::int64_t intermediate) {
    const std::uint64_t per_layer = static_cast<std::uint64_t>(experts) * static_cast<std::uint64_t>(hidden + intermediate) * 4;
    return per_layer * static_cast<std::uint64_t>(layers) * (wants_legacy_imatrix(path) ? 1 : 2);
}

namespace {

// One stacked tensor's statistics, as F32 [experts][cols] (llama-imatrix's file stores its sums
// and counts as F32); experts no token reached keep zeros.
struct MeasuredEntry {
    std::int64_t cols = 0;
    std::vector<float> sums, input_sums, counts;
};

MeasuredEntry measured(const std::string& name, std::int64_t experts, const std::vector<ExpertStatistics>& stats,
                       const ColumnStatistics ExpertStatistics::*which) {
    MeasuredEntry out{.cols = static_cast<std::int64_t>((stats.front().*which).squares.size())};
    const auto size = static_cast<std::size_t>(experts * out.cols);
    out.sums.assign(size, 0.0f);
    out.input_sums.assign(size, 0.0f);
    out.counts.assign(static_cast<std::size_t>(experts), 0.0f);
    for (const ExpertStatistics& e : stats) {
        const ColumnStatistics& s = e.*which;
        if (e.expert < 0 || e.expert >= experts || static_cast<std::int64_t>(s.squares.size()) != out.cols)
            throw Error(ErrorKind::internal, "expert " + std::to_string(e.expert) + " does not fit the imatrix entry " + name);
        const auto at = static_cast<std::size_t>(e.expert * out.cols);
        std::transform(s.squares.begin(), s.squares.end(), out.sums.begin() + static_cast<std::ptrdiff_t>(at),
                       [](double v) { return static_cast<float>(v); });
        std::transform(s.sums.begin(), s.sums.end(), out.input_sums.begin() + static_cast<std::ptrdiff_t>(at),
                       [](double v) { return static_cast<float>(v); });
        out.counts[static_cast<std::size_t>(e.expert)] = static_cast<float>(s.tokens);
        // llama-imatrix stops on a non-finite sum, and llama-quantize refuses such a file.
        const std::span<const float> written(out.sums.data() + at, static_cast<std::size_t>(out.cols));
        const auto bad = std::find_if(written.begin(), written.end(), [](float v) { return !std::isfinite(v); });
        if (bad != written.end())
            throw Error(ErrorKind::input, "the importance statistics of " + name + " are not finite (expert " + std::to_string(e.expert) +
                                              ", column " + std::to_string(bad - written.begin()) +
                                              "): the model's weights or activations overflow or hold NaN/Inf",
                        {.code = "NonFiniteImatrix"});
    }
    return out;
}

std::span<const std::byte> bytes_of(const std::vector<float>& v) { return std::as_bytes(std::span<const float>(v)); }

}  // namespace

std::vector<std::int64_t> RecordedImatrix::add_layer(std::int64_t layer, const std::vector<ExpertStatistics>& experts) {
    if (experts.empty()) return {};
    auto spool = [&](const std::string& name, const ColumnStatistics ExpertStatistics::*which) {
        const MeasuredEntry m = measured(name, experts_, experts, which);
        Entry e{.name = name, .cols = m.cols, .counts = m.counts, .sums_at = spool_->append(bytes_of(m.sums))};
        if (input_sums_) e.input_sums_at = spool_->append(bytes_of(m.input_sums));
        return e;
    };
    // gate and up see the same inputs: llama-imatrix records the same statistics for both (one copy spooled).
    Entry gate = spool(formats::gguf_expert_tensor_name(layer, Projection::gate), &ExpertStatistics::inputs);
    Entry up = gate;
    up.name = formats::gguf_expert_tensor_name(layer, Projection::up);
    Entry down = spool(formats::gguf_expert_tensor_name(layer, Projection::down), &ExpertStatistics::down_inputs);
    std::vector<std::int64_t> unseen;
    for (std::size_t e = 0; e < down.counts.size(); ++e)
        if (down.counts[e] == 0.0f) unseen.push_back(static_cast<std::int64_t>(e));
    entries_.push_back(std::move(gate));
    entries_.push_back(std::move(up));
    entries_.push_back(std::move(down));
    return unseen;
}

void RecordedImatrix::write(const std::string& dataset, std::uint32_t chunks, std::uint32_t chunk_size) {
    formats::ImatrixWeights weights{.datasets = {dataset}, .chunk_count = chunks, .chunk_size = chunk_size};
    for (const Entry& e : entries_)
        weights.weights.push_back({.name = e.name, .cols = e.cols, .counts = e.counts, .has_input_sums = input_sums_,
                                   .read = [this, &e](std::int64_t m, bool input, std::span<float> row) {
                                       const std::uint64_t at = (input ? e.input_sums_at : e.sums_at) + static_cast<std::uint64_t>(m * e.cols) * 4;
                                       spool_->read_at(at, std::as_writable_bytes(row));
                                   }});
    if (wants_legacy_imatrix(path_)) formats::write_imatrix_legacy(path_, weights);
    else formats::write_imatrix_gguf(path_, weights);
}

std::string unseen_experts_sentence(std::int64_t layer, const std::vector<std::int64_t>& unseen) {
    constexpr std::size_t named = 16;  // a long list is cut; the file's counts have all of them
    std::string list;
    for (std::size_t i = 0; i < std::min(unseen.size(), named); ++i) list += (i ? ", " : "") + std::to_string(unseen[i]);
    if (unseen.size() > named) list += ", ... (" + std::to_string(unseen.size()) + " in all)";
    return "layer " + std::to_string(layer) + ": no calibration token was routed to expert(s) " + list;
}

}  // namespace moequant::cli
