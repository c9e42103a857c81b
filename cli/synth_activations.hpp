// Synthetic calibration activations for a synthesized model (moequant synth --activations):
// the recorded-activation file of conventions.md §4 with hidden-state-like values — per channel
// a random offset and power-of-two scale, 2% of channels 16x hotter (the outlier channels real
// hidden states have) — so GPTQ has a Hessian worth using. Deterministic for a seed.
#pragma once

#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <filesystem>

namespace moequant::cli {

// Writes `file` (safetensors): layers.{L}.moe_input BF16 [samples * tokens, hidden] for every MoE
// layer of the plan, and sample_lengths I64 [samples] (each `tokens`). Atomic (temporary name).
void write_synthetic_activations(const std::filesystem::path& file, const ModelPlan& plan, std::int64_t samples,
                                 std::int64_t tokens, std::uint64_t seed);

}  // namespace moequant::cli
