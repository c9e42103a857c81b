// What config.json's quantization_config says about a GPTQ checkpoint (model-families-2026.md
// §2.4): bits, group size, act-order and the zero-point convention, read from AutoGPTQ's and
// GPTQModel's keys. Everything the decoder cannot reproduce exactly is refused here, naming the
// weight's qweight tensor and the key.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/model_config.hpp>

#include <cstdint>
#include <string>

namespace moequant::encodings {

// How qzeros store a zero point z: v1 ("gptq") stores z − 1, v2 ("gptq_v2") stores z.
enum class GptqZeros { v1, v2 };

struct GptqConfig {
    std::int64_t group_size = 0;  // as declared: −1 (one group per row) or > 0
    bool desc_act = false;        // act-order: g_idx permutes the group assignment
    bool sym = true;              // informational: zeros are read either way
    GptqZeros zeros = GptqZeros::v1;
};

// The GPTQ settings of the weight whose packed words are `qweight`. Refuses a missing
// quantization_config (with a hint when an old AutoGPTQ quantize_config.json lies beside it),
// AWQ and any other method, bits other than 4, packings other than gptq/gptq_v2 in int32 words,
// a missing or invalid group size, and per-module overrides of bits or group size.
GptqConfig gptq_config(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& qweight);

}  // namespace moequant::encodings
