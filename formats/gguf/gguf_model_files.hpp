// The files of one GGUF model: a single .gguf, or llama-gguf-split's parts PREFIX-0000K-of-0000N.gguf
// found from the first one; a folder holding moequant's parts (model-00001-of-0000N.gguf …, model.gguf)
// or exactly one model of any name. Shared by the output reader (verify, eval) and the checkpoint
// reader (GGUF as a source).
#pragma once

#include <filesystem>
#include <vector>

namespace moequant::formats {

// The model's files, the first part first. Empty when `path` is neither a .gguf file nor a folder
// holding one; Error(input) naming the file for a later part given alone (NotFirstPart) or a folder
// of several models (AmbiguousOutput). The files are not checked to exist.
std::vector<std::filesystem::path> gguf_model_files(const std::filesystem::path& path);

}  // namespace moequant::formats
