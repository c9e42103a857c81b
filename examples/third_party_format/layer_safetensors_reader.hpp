// Reading an `example-layer-safetensors` output back, for `moequant verify`.
#pragma once

#include <moequant/output_format.hpp>

#include <filesystem>
#include <memory>

namespace example_layer_safetensors {

// Null when `directory` holds no index of this format; Error(input) naming the file when the
// index or a layer file is broken. Every name, number and count read is checked.
std::unique_ptr<moequant::OutputReader> open_layer_safetensors(const std::filesystem::path& directory);

}  // namespace example_layer_safetensors
