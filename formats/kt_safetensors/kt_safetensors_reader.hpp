// Reading a merged kt output back (moequant verify): the expert tensors listed by
// model.safetensors.index.json, parsed from their names (kt-cpu-format.md §7.1), whoever wrote
// them; the `__metadata__` moequant records (method, parts, experts, source) when present.
#pragma once

#include <moequant/output_format.hpp>

#include <filesystem>
#include <memory>

namespace moequant::formats {

// Null when `directory` holds no merged kt output; throws Error(input) when it holds an
// unfinished one (a kt-safetensors run manifest without the index).
std::unique_ptr<OutputReader> open_kt_safetensors(const std::filesystem::path& directory);

}  // namespace moequant::formats
