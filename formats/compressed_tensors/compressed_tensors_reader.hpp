// Reading a compressed-tensors pack-quantized checkpoint back (moequant verify): recognised by
// config.json's quantization_config (quant_method compressed-tensors, format pack-quantized)
// and an index; routed experts are found by their module names
// (`...layers.L.<...>.experts.E.{gate_proj|up_proj|down_proj|w1|w3|w2}.weight_packed`), whoever
// wrote the checkpoint.
#pragma once

#include <moequant/output_format.hpp>

#include <filesystem>
#include <memory>

namespace moequant::formats {

// Null when `directory` is not a compressed-tensors output; Error(input) when it is one but is
// incomplete or its quantization_config is not one we read.
std::unique_ptr<OutputReader> open_compressed_tensors(const std::filesystem::path& directory);

}  // namespace moequant::formats
