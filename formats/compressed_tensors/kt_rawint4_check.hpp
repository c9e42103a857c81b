// Whether kt-kernel's RAWINT4 CPU MoE method can serve the routed experts of a folder it is
// pointed at (`--kt-method RAWINT4 --kt-weight-path DIR`, the folder SGLang's --model also
// loads): what its CompressedSafeTensorLoader finds there and what its backends compute right
// (gptq-compressed-tensors.md §9, model-families-2026.md §4.1; docs/kt-rawint4.md lists the
// rules with the kt-kernel source lines they come from). kt itself checks little of this: a
// group size its default backend cannot run gives wrong results, not an error. The
// compressed-tensors format's runtime check "kt-rawint4" (verify --for kt-rawint4).
#pragma once

#include <moequant/model_adapter.hpp>
#include <moequant/output_format.hpp>

#include <filesystem>

namespace moequant::formats {

// The check's name and how verify's report speaks of it.
RuntimeCheckInfo kt_rawint4_check_info();

// Reads every *.safetensors under `folder` (headers, each weight_shape, and every expert's codes
// for the range kt computes right) as kt's loader does, for the MoE layers and shapes of `plan`
// (the source's: kt takes hidden_size and the expert count from the model's config). Problems'
// rules: ExpertsFound, ExpertTensors, Int4Codes, Int4Range, Symmetric, Bf16Scales, NoGroupIndex,
// OneGroupSize, WeightShape, OneTensorPerName, ReadableFiles, Backend. Its fact is group_size
// (kt's hidden_size / gate scale columns), its verdicts kt's RAWINT4 backends. A *.safetensors
// file that cannot be read is a problem (ReadableFiles), as it stops kt's loader; Error(io) only
// when the folder cannot be listed.
RuntimeCheckReport check_kt_rawint4(const std::filesystem::path& folder, const ModelPlan& plan);

}  // namespace moequant::formats
