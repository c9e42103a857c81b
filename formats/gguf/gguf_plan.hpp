// The GGUF files of one conversion, planned from the job before anything is written: every
// tensor with its GGUF name, dims and the type llama-quantize's rules give it (the preset and
// overrides are format options), the metadata, and how the tensors fall into files: one
// gguf-split part per MoE layer holding its stacked experts, and the first part holding the
// metadata and every other tensor, written last — or packed by size (gguf_packing.hpp). Names
// follow gguf-split: model-00001-of-0000N.gguf; one file is model.gguf.
#pragma once

#include "gguf_architecture.hpp"
#include "gguf_container.hpp"
#include "gguf_imatrix.hpp"

#include <moequant/output_format.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moequant::formats {

// A tensor of the output: from a checkpoint weight (`source`), or the stacked experts of
// (`layer`, `projection`).
struct GgufPlannedTensor {
    GgufTensorInfo info;
    std::string source;  // checkpoint weight name; empty for experts
    std::int64_t layer = -1;
    Projection projection = Projection::gate;
    std::int64_t expert_bytes = 0;  // experts: bytes of one expert's matrix
    // deepseek2's attn_k_b / attn_v_b: this part of the source kv_b_proj (gguf_mla_split.hpp).
    std::optional<MlaPart> mla_part;
    MlaShape mla;
    // Its importance-matrix entry (--imatrix), shaped as the tensor: quantized tensors only.
    std::optional<ImatrixEntry> importance;
    // The source's rows (over its last dimension) and columns in this tensor's order (a family's
    // GgufTensorTransform, llama's Q/K interleave), and what is done to its values on the way;
    // empty: as stored.
    std::vector<std::int64_t> source_rows, source_cols;
    GgufTensorTransform::Values values = GgufTensorTransform::Values::as_stored;
    // The type the converter writes it in: the values llama-quantize starts from are that type's
    // (BF16-rounded, or through Q8_0 for DeepSeek-V4's FP8 weights).
    std::uint32_t converter_type = 0;
    // I32 index tables (DeepSeek-V4's token -> expert hash routing): every value must be below this.
    std::int64_t index_limit = 0;
};

// The values of integer table `name` (I64 or I32 on disk) as I32, each checked to be an index
// below `limit`: Error(input) naming the tensor and the first value that is not.
std::vector<std::int32_t> gguf_index_table(const Checkpoint& source, const std::string& name, std::int64_t limit);

struct GgufSplit {
    std::string name;
    std::vector<GgufPlannedTensor> tensors;
    GgufLayout layout;  // header and offsets (tensor infos carry them too)
};

struct GgufPlan {
    GgufArchitecture architecture;
    GgufPreset preset;
    std::vector<GgufSplit> splits;  // the output's files ([0] holds the metadata), gguf_packing.hpp
    // The file each MoE layer's experts are written to as the layer completes: its own part (one of
    // `splits`), or when packed a staging file the end of the run folds into the parts.
    std::map<std::int64_t, GgufSplit> layer_files;
    bool packed = false;
    // The source stores its experts in MXFP4 and some expert tensors are MXFP4: the `gguf`
    // quantizer carries their stored codes (option gguf.carry=mxfp4), as the converter and
    // llama-quantize keep them, and quantizes the others' decoded values.
    bool carries_mxfp4 = false;
    std::shared_ptr<const ImatrixFile> imatrix;  // option "imatrix" (indexed, values not read)
};

// Reads the format options (preset, tensor_types, output_tensor_type, token_embedding_type, pure,
// leave_output, imatrix, measured_importance) and plans every file. Error(usage) for bad options, Error(input) naming the
// tensor for what GGUF cannot hold.
GgufPlan plan_gguf(const OutputContext& context);

// "LAYER:GATE,UP,DOWN;..." with ggml's type names: the `gguf` quantizer's option gguf.expert_types.
std::string gguf_expert_types(const GgufPlan& plan);

// model-{k:05d}-of-{n:05d}.gguf, k from 1.
std::string gguf_split_name(std::size_t index, std::size_t count);
inline constexpr const char* gguf_single_file_name = "model.gguf";
// A packed output's staging file of MoE layer `layer`: model-layer-{layer:05d}.staged (not
// *.gguf, so no GGUF reader of the folder takes it for a part).
std::string gguf_staged_layer_name(std::int64_t layer);

}  // namespace moequant::formats
