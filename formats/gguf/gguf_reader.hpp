// Reading a gguf output back (verify, eval): its expert tensors, each expert's matrix as one
// part "weight" (U8 rows of its GGUF type), and the recorded facts the `gguf` quantizer needs
// (gguf.expert_types from the tensors' types).
#pragma once

#include <moequant/output_format.hpp>

#include <filesystem>
#include <memory>

namespace moequant::formats {

// The GGUF model at `path`, any writer's (moequant's, llama-quantize's, llama-gguf-split's): a
// .gguf file (a single one, or the first part of a split one, whose siblings
// PREFIX-0000K-of-0000N.gguf are read with it), or a folder holding moequant's parts
// (model-00001-of-0000N.gguf …, model.gguf) or exactly one model of another name. Null when the
// path holds no GGUF model. Error(input) naming the file when a part is missing or broken, a
// later part is given alone, or a folder holds several models.
std::unique_ptr<OutputReader> open_gguf(const std::filesystem::path& path);

}  // namespace moequant::formats
