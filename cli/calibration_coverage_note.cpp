#include "calibration_coverage_note.hpp"

#include <moequant/engine/run_manifest.hpp>

#include <cstdio>
#include <string>

namespace moequant::cli {

void note_calibration_fallbacks(const std::filesystem::path& output) {
    const auto manifest = RunManifest::load(output);
    if (!manifest) return;
    std::string layers;
    std::size_t experts = 0;
    for (const auto& l : manifest->completed_layers) {
        if (!l.coverage || l.coverage->fallback_experts.empty()) continue;
        experts += l.coverage->fallback_experts.size();
        layers += std::string(layers.empty() ? "" : "; ") + "layer " + std::to_string(l.layer) + ": ";
        for (std::size_t i = 0; i < l.coverage->fallback_experts.size(); ++i)
            layers += (i ? "," : "") + std::to_string(l.coverage->fallback_experts[i]);
    }
    if (experts == 0) return;
    std::fprintf(stderr,
                 "moequant: note: calibration coverage: %zu expert(s) got no routed token and were calibrated on all "
                 "tokens instead (%s); tokens per expert are in %s\n",
                 experts, layers.c_str(), run_manifest_name);
}

}  // namespace moequant::cli
