// How an FP8 weight is scaled (model-families-2026.md §2.3): finding its scale tensor among the
// names releases use, and deciding block, per-channel or per-tensor from the scale's exact
// shape — never from its name — checked against what the config declares.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/fp8_dequant.hpp>
#include <moequant/model_config.hpp>

#include <optional>
#include <string>

namespace moequant::encodings {

enum class Fp8Strategy { block, channel, tensor };
std::string_view strategy_name(Fp8Strategy s) noexcept;

struct Fp8Scaling {
    Fp8Strategy strategy = Fp8Strategy::block;
    std::string scale_tensor;
    // The block the kernel applies: the config's block, [1, K] per channel, [N, K] per tensor.
    BlockSize block;
    std::optional<std::string> input_scale;  // ignored: activations are not our concern
};

// The weight a scale tensor belongs to: `<w>_scale_inv` (DeepSeek, Qwen, MiniMax), `<w>_scale`
// (compressed-tensors, Mistral), a 2-D `<stem>.scale` (DeepSeek-V4, for `<stem>.weight`), and
// the `<stem>.input_scale` of activations.
std::optional<std::string> fp8_scale_owner(const TensorInfo& tensor);

// Refuses (Error(input), naming the tensor and the rule) what cannot be decoded exactly.
Fp8Scaling fp8_scaling(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& weight,
                       const TensorInfo& info);

}  // namespace moequant::encodings
