// What config.json's quantization_config says about an AutoAWQ checkpoint (transformers'
// AwqConfig, AutoAWQ's quant_config): 4 bits, the group size, zero points, the GEMM packing.
// Everything the decoder cannot reproduce exactly is refused, naming the weight's qweight
// tensor and the key.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/model_config.hpp>

#include <cstdint>
#include <string>

namespace moequant::encodings {

struct AwqConfig {
    std::int64_t group_size = 0;  // input features per scale and zero point
};

// The AWQ settings of the weight whose packed words are `qweight`. Refuses bits other than 4,
// a missing or non-positive group size, zero_point false, and packings other than GEMM (GEMV,
// GEMV_fast, Marlin, ExLlama and IPEX lay the words out otherwise).
AwqConfig awq_config(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& qweight);

}  // namespace moequant::encodings
