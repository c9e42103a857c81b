// Getting weight values out of a checkpoint through their encodings (source_encoding.hpp):
// windows of any weight, one routed expert's matrix, and the threadpool parts of kt-kernel
// (kt-cpu-format.md §2, §5).
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/export.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/source_encoding.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <span>

namespace moequant {

// Decodes `window` of `weight` into `out` (window.rows() x window.cols() values of `target`,
// row-major), in parallel over row chunks: the result does not depend on the thread count.
// A window outside the weight's shape or an `out` of the wrong size is Error(internal).
MOEQUANT_API void decode_weight(const Checkpoint& checkpoint, const EncodedWeight& weight, const DecodeWindow& window,
                                DecodeTarget target, std::span<std::byte> out);

// The whole of a 2-D weight, or matrix `matrix` of a 3-D one, as a BF16 or F32 tensor.
MOEQUANT_API Tensor decode_matrix(const Checkpoint& checkpoint, const EncodedWeight& weight, std::int64_t matrix = 0,
                                  DecodeTarget target = DecodeTarget::bf16);

// The [rows, cols] matrix a plan entry describes: a weight or a slice of a fused one (transposed
// where the layout stores [in, out]), decoded by its encoding. Error(input) names the weight
// when its shape is not what the plan says.
MOEQUANT_API Tensor load_expert_matrix(const Checkpoint& checkpoint, const ExpertWeightSource& source,
                                       DecodeTarget target = DecodeTarget::bf16);

// Part `part` of `parts` of a BF16 or F32 projection matrix: gate and up [I, H] are split by rows,
// down [H, I] by columns, into I / parts each. Error(input) when I is not divisible by parts.
MOEQUANT_API Tensor split_expert_part(const Tensor& matrix, Projection projection, int part, int parts);

// Bytes a layer's experts read from the checkpoint (their share of every tensor they are
// decoded from, scales included).
MOEQUANT_API std::uint64_t layer_input_bytes(const Checkpoint& checkpoint, const MoeLayerPlan& layer);

// Drops the page-cache mappings of every tensor a layer's experts are decoded from, so memory
// stays about one layer however large the model.
MOEQUANT_API void release_layer_pages(const Checkpoint& checkpoint, const MoeLayerPlan& layer);

}  // namespace moequant
