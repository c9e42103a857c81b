// Where MXFP4 weights sit on disk (model-families-2026.md §2.1, §3.7, §3.8), recognised from the
// safetensors headers alone: the dtypes and shapes are decisive, config.json only corroborates.
//  - DeepSeek-V4: `<stem>.weight` I8/U8 [N, K/2] + `<stem>.scale` F8_E8M0/U8 [N, K/32], the
//    dense weight `<stem>.weight` [N, K].
//  - gpt-oss (HF): `X_blocks` U8 [E, R, K/32, 16] + `X_scales` U8 [E, R, K/32], the fused weight
//    `X` [E, R, K]; the [K/32, 16] tail is byte for byte a [K/2] packed row. `X_bias` is a
//    separate tensor of the model, not part of the weight.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/source_encoding.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace moequant::encodings {

// The weight an MXFP4 component belongs to, from its header entry: a 2-D F8_E8M0/U8
// `<stem>.scale` -> `<stem>.weight`; a 4-D `X_blocks` or 3-D `X_scales` of bytes -> `X`; a 2-D U8
// `<m>.weight_packed` -> `<m>.weight` (compressed-tensors MXFP4, recognised to be refused).
// Dtype and rank keep unrelated tensors (a 1-D `norm.scale`) unclaimed.
std::optional<std::string> mxfp4_component_owner(const TensorInfo& tensor);

// On a match fill `out` (shape, tensors packed then scale, parameters, summary) and return true;
// false when the tensors are not this layout; Error(input) when they unmistakably are but cannot
// be decoded exactly (F4 dtype, shapes that disagree, a missing half).
bool recognise_deepseek_v4(std::string_view name, const Checkpoint& checkpoint, EncodedWeight& out);
bool recognise_gpt_oss(std::string_view name, const Checkpoint& checkpoint, EncodedWeight& out);

}  // namespace moequant::encodings
