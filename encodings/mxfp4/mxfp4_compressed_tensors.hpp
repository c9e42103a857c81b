// compressed-tensors `mxfp4-pack-quantized` (model-families-2026.md §2.1, §6 Q2):
// `<m>.weight_packed` U8 [N, K/2] + `<m>.weight_scale` U8 [N, K/32]. Recognised only to be
// refused: which E8M0 bias the scale bytes carry (127 or 125) depends on the compressed-tensors
// version that wrote the file, and the file does not say. The INT4 `pack-quantized` format
// (I32 words) belongs to another encoding.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/model_config.hpp>

#include <string_view>

namespace moequant::encodings {

// Error(input) "UnsupportedEncoding" when weight `name` is stored as compressed-tensors MXFP4
// (a U8 `weight_packed` with group-32 byte scales, or with the format announced in config.json).
void refuse_compressed_tensors_mxfp4(std::string_view name, const Checkpoint& checkpoint, const ModelConfig* config);

}  // namespace moequant::encodings
