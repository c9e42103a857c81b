// Whether kt-kernel's LLAMAFILE CPU MoE method can serve the routed experts of a folder it is
// pointed at (`--kt-method LLAMAFILE --kt-weight-path DIR`): what its GGUFLoader finds in the
// folder's *.gguf files and what its llamafile kernels multiply (ktransformers 95009ea6:
// python/utils/llamafile.py, python/utils/loader.py, operators/llamafile/moe.hpp; docs/gguf-format.md
// lists the rules). The gguf format's runtime check "kt-llamafile" (verify --for kt-llamafile).
#pragma once

#include <moequant/model_adapter.hpp>
#include <moequant/output_format.hpp>

#include <filesystem>

namespace moequant::formats {

RuntimeCheckInfo kt_llamafile_check_info();

// Reads the headers of every *.gguf in `folder` (kt loads them all, sorted) for the MoE layers
// and shapes of `plan`. Problems' rules: ReadableFiles, OneTensorPerName, ExpertsFound,
// SeparateGateUp, ExpertShapes, KtTypes, IntermediateBlocks. Its fact: the largest
// --kt-threadpool-count (whole 256-value blocks per part).
RuntimeCheckReport check_kt_llamafile(const std::filesystem::path& folder, const ModelPlan& plan);

}  // namespace moequant::formats
