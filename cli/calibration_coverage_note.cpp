#include "calibration_coverage_note.hpp"
#include "expert_counts.hpp"

#include <moequant/engine/run_manifest.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace moequant::cli {

namespace {

// "fewest 3, median 40, most 212 routed tokens per expert over 2 layer(s)", or "every expert of
// 2 layer(s) saw all 4096 tokens".
std::string coverage_summary(const RunManifest& manifest) {
    std::vector<std::int64_t> counts;
    std::int64_t layers = 0, all_tokens = 0;
    bool routed = false;
    for (const auto& l : manifest.completed_layers) {
        if (!l.coverage) continue;
        ++layers;
        routed = routed || l.coverage->routed_only;
        all_tokens = std::max(all_tokens, l.coverage->tokens);
        counts.insert(counts.end(), l.coverage->tokens_per_expert.begin(), l.coverage->tokens_per_expert.end());
    }
    if (layers == 0 || counts.empty()) return {};
    if (!routed)
        return "every expert of " + std::to_string(layers) + " layer(s) saw all " + std::to_string(all_tokens) + " tokens";
    return count_spread(std::move(counts)) + " routed tokens per expert over " + std::to_string(layers) + " layer(s)";
}

}  // namespace

void note_calibration_coverage(const std::filesystem::path& output, bool quiet) {
    const auto manifest = RunManifest::load(output);
    if (!manifest) return;
    if (const std::string summary = coverage_summary(*manifest); !summary.empty() && !quiet)
        std::fprintf(stderr, "moequant: calibration coverage: %s (per expert in %s)\n", summary.c_str(), run_manifest_name);
    std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>> fallbacks;
    std::size_t experts = 0;
    for (const auto& l : manifest->completed_layers) {
        if (!l.coverage) continue;
        experts += l.coverage->fallback_experts.size();
        fallbacks.emplace_back(l.layer, l.coverage->fallback_experts);
    }
    if (experts == 0) return;
    const std::string layers = layer_expert_list(fallbacks);
    std::fprintf(stderr,
                 "moequant: note: calibration coverage: %zu expert(s) got no routed token and were calibrated on all "
                 "tokens instead (%s); tokens per expert are in %s\n",
                 experts, layers.c_str(), run_manifest_name);
}

}  // namespace moequant::cli
