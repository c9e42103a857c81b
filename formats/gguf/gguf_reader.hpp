// Reading a gguf output back (verify, eval): its expert tensors, each expert's matrix as one
// part "weight" (U8 rows of its GGUF type), and the recorded facts the `gguf` quantizer needs
// (gguf.expert_types from the tensors' types).
#pragma once

#include <moequant/output_format.hpp>

#include <filesystem>
#include <memory>

namespace moequant::formats {

// The output in `directory` when it holds moequant's GGUF parts (model-00001-of-0000N.gguf and
// the rest); null when it holds none. Error(input) naming the file when a part is missing or broken.
std::unique_ptr<OutputReader> open_gguf(const std::filesystem::path& directory);

}  // namespace moequant::formats
