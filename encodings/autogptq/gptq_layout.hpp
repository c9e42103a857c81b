// The tensors of one GPTQ Linear and the shapes they must have (model-families-2026.md §2.4):
// qweight I32 [K/8, N], qzeros I32 [G, N/8], scales F16/BF16/F32 [G, N], g_idx I32 [K]
// (optional), with G = ceil(K / group). Everything is decided from the headers; a shape that
// disagrees is refused, naming both tensors and the shapes.
#pragma once

#include "gptq_config.hpp"

#include <moequant/checkpoint.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace moequant::encodings {

struct GptqLayout {
    std::string qweight, qzeros, scales;
    std::optional<std::string> g_idx;
    std::int64_t in_features = 0;   // K: the logical weight's columns
    std::int64_t out_features = 0;  // N: the logical weight's rows
    std::int64_t group = 0;         // the group size in input features (K for group_size −1)
    std::int64_t groups = 0;        // G = ceil(K / group): the rows of scales and qzeros
    DType scale_dtype = DType::F16;
};

// The layout of the Linear whose packed words are `<stem>.qweight` (which must exist).
GptqLayout gptq_layout(const Checkpoint& checkpoint, const std::string& stem, const GptqConfig& config);

}  // namespace moequant::encodings
