// MX block scaling as MXFP8 checkpoints store it (MiniMax-M3): one E8M0 byte per 32 consecutive
// elements of a row, in a `<weight>_scale_inv` tensor of dtype U8 or F8_E8M0 shaped [N, K/32].
// The fp8 encoding leaves such weights to the mxfp8 encoding; both ask this one rule.
#pragma once

#include "encoding_rules.hpp"

namespace moequant::encodings {

inline constexpr std::int64_t mx_block = 32;

// quantization_config's quant_method names MXFP8 ("mxfp8"): every FP8 weight is then the mxfp8
// encoding's, which refuses scales of another shape.
inline bool announces_mxfp8(const ModelConfig* config) { return quant_method(config).find("mxfp8") != std::string::npos; }

// The tensor `name` when it is an FP8 (E4M3 or E5M2) weight, else null.
inline const TensorInfo* fp8_weight(const Checkpoint& checkpoint, std::string_view name) {
    if (!checkpoint.contains(name)) return nullptr;
    const TensorInfo& info = checkpoint.info(name);
    return info.dtype == DType::F8_E4M3 || info.dtype == DType::F8_E5M2 ? &info : nullptr;
}

// The E8M0 scale tensor of 2-D FP8 weight `weight`, when it has one of the MX shape.
inline std::optional<std::string> mx_block_scale(const Checkpoint& checkpoint, const std::string& weight) {
    if (!checkpoint.contains(weight)) return std::nullopt;
    const TensorInfo& w = checkpoint.info(weight);
    const std::string scale = weight + "_scale_inv";
    if (w.shape.size() != 2 || w.shape[1] % mx_block != 0 || !checkpoint.contains(scale)) return std::nullopt;
    const TensorInfo& s = checkpoint.info(scale);
    if (s.dtype != DType::U8 && s.dtype != DType::F8_E8M0) return std::nullopt;
    if (s.shape != Shape{w.shape[0], w.shape[1] / mx_block}) return std::nullopt;
    return scale;
}

}  // namespace moequant::encodings
