// `moequant inspect` on a converted output folder (kt-safetensors is a checkpoint in its own
// right and is inspected as one; a gguf or kt-tree folder is not): which installed format
// recognises it, its files and sizes, what it records of itself (method, quantizer, types per
// layer, ...), how many expert matrices it stores, its run manifest and the runtime checks
// verify --for can run on it. Only headers and the manifest are read.
#pragma once

#include <moequant/engine/plugin_registry.hpp>

#include <filesystem>

namespace moequant::cli {

// Prints the summary of the converted output in `directory` (text, or JSON when `as_json`).
// Error(input, UnknownOutput) when no installed format recognises it.
void inspect_converted_output(const Registry& registry, const std::filesystem::path& directory, bool as_json);

}  // namespace moequant::cli
