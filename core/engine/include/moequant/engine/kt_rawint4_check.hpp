// Whether kt-kernel's RAWINT4 CPU MoE method can serve the routed experts of a folder it is
// pointed at (`--kt-method RAWINT4 --kt-weight-path DIR`, the folder SGLang's --model also
// loads): what its CompressedSafeTensorLoader finds there and what its backends compute right
// (gptq-compressed-tensors.md §9, model-families-2026.md §4.1; docs/kt-rawint4.md lists the
// rules with the kt-kernel source lines they come from). kt itself checks little of this: a
// group size its default backend cannot run gives wrong results, not an error.
#pragma once

#include <moequant/export.hpp>
#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace moequant {

struct KtRawint4Problem {
    std::string rule;     // ExpertsFound, ExpertTensors, Int4Codes, Int4Range, Symmetric, Bf16Scales,
                          // NoGroupIndex, OneGroupSize, WeightShape, OneTensorPerName, ReadableFiles, Backend
    std::string message;  // names the tensor (and file) and what is wrong
};

// One RAWINT4 backend and whether it computes this folder's experts right.
struct KtRawint4Backend {
    std::string name;  // its KT_RAWINT4_BACKEND value
    std::string when;  // when kt chooses it, and what it needs of the CPU and the launch
    bool runs = false;
    std::string why;   // why not, when it does not
};

struct KtRawint4Report {
    std::vector<KtRawint4Problem> problems;  // the first few of each rule
    std::size_t problem_count = 0;           // all of them
    std::int64_t group_size = 0;             // kt's hidden_size / gate scale columns; 0 when not found
    std::vector<KtRawint4Backend> backends;  // filled when no problem stops the layout
    std::vector<std::string> warnings;
    bool usable() const noexcept { return problem_count == 0; }
};

// Reads every *.safetensors under `folder` (headers, each weight_shape, and every expert's codes
// for the range kt computes right) as kt's loader does,
// for the MoE layers and shapes of `plan` (the source's: kt takes hidden_size and the expert
// count from the model's config). A *.safetensors file that cannot be read is a problem
// (ReadableFiles), as it stops kt's loader; Error(io) only when the folder cannot be listed.
MOEQUANT_API KtRawint4Report check_kt_rawint4(const std::filesystem::path& folder, const ModelPlan& plan);

}  // namespace moequant
