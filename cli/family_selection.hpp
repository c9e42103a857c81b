// Choosing the model-family adapter for a checkpoint: the best match() score wins, or the
// user's --family override; otherwise a clear error listing what is installed.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/model_config.hpp>

#include <optional>
#include <string>

namespace moequant::cli {

struct SelectedAdapter {
    const ModelAdapter* adapter = nullptr;
    bool overridden = false;  // chosen by --family rather than by match()
};

// An adapter by id, by one of the model types it owns or by one of its synth releases; nullptr
// if none.
const ModelAdapter* find_adapter(const Registry& registry, const std::string& family);

// What `synth --family NAME` writes: the adapter, the model_type of its config.json and, when
// NAME is a release (SynthRelease), that release.
struct SynthTarget {
    const ModelAdapter* adapter = nullptr;
    std::string model_type;
    std::optional<SynthRelease> release;
};
// Throws Error(usage) naming the installed adapters and releases when NAME is none of them.
SynthTarget find_synth_target(const Registry& registry, const std::string& family);

// Throws Error(usage) for an unknown --family and Error(input, code "UnknownFamily") when no
// adapter recognises the checkpoint.
SelectedAdapter select_adapter(const Registry& registry, const ModelConfig& config, const Checkpoint& checkpoint,
                               const std::string& family_override);

// A source checkpoint opened with its config and the MoE plan of its family's adapter (what
// convert and verify start from).
struct PlannedSource {
    Checkpoint checkpoint;
    ModelConfig config;
    ModelPlan plan;
};

PlannedSource open_planned_source(const Registry& registry, const std::string& path, const std::string& family_override);

// "deepseek_v3 (deepseek_v3, kimi_k2), mixtral (mixtral)" or "none".
std::string installed_adapters(const Registry& registry);
// "minimax_m27 (minimax_m2), kimi_k26 (deepseek_v3)": each release and its adapter, or "none".
std::string installed_releases(const Registry& registry);

}  // namespace moequant::cli
