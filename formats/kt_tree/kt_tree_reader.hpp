// Reading a `.kt` tree back (moequant verify): `_layer_{L}/_numa_{i}/{P}_{proj}_{e}_{B}Byte_
// {quant|scale}_.kt` files parsed from their names (kt-cpu-format.md §6), whoever wrote them.
// Staging folders (`._layer_{L}.partial`) and other files are not part of the output.
#pragma once

#include <moequant/output_format.hpp>

#include <filesystem>
#include <memory>

namespace moequant::formats {

// Null when `directory` holds no `_layer_*` folder; throws Error(input) when it holds an
// unfinished conversion (a kt-tree run manifest not marked complete).
std::unique_ptr<OutputReader> open_kt_tree(const std::filesystem::path& directory);

}  // namespace moequant::formats
