// Getting one routed expert's weight matrix out of a checkpoint, as BF16, and splitting it into
// the threadpool parts of kt-kernel (kt-cpu-format.md §2, §5).
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/export.hpp>
#include <moequant/fp8_dequant.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <optional>

namespace moequant {

// The [rows, cols] BF16 matrix a plan entry describes: a per-expert tensor or a slice of a
// fused one (transposed where the layout stores [in, out]). BF16 is copied as is, F16 and F32
// are rounded to BF16 (nearest even), F8_E4M3 is block-dequantized with `fp8_block` and the
// scale tensor (a float32 multiply, then BF16: model-families.md §4.4). Error(input) names the
// tensor when its dtype or shape is not what the plan says.
MOEQUANT_API Tensor load_expert_matrix(const Checkpoint& checkpoint, const ExpertWeightSource& source,
                                       const std::optional<BlockSize>& fp8_block);

// Part `part` of `parts` of a BF16 projection matrix: gate and up [I, H] are split by rows,
// down [H, I] by columns, into I / parts each. Error(input) when I is not divisible by parts.
MOEQUANT_API Tensor split_expert_part(const Tensor& matrix, Projection projection, int part, int parts);

// Bytes of every expert weight a layer reads from the checkpoint (scales not counted).
MOEQUANT_API std::uint64_t layer_input_bytes(const MoeLayerPlan& layer);

// Drops the page-cache mappings of every tensor a layer's experts are read from (weights and
// FP8 scales), so memory stays about one layer however large the model.
MOEQUANT_API void release_layer_pages(const Checkpoint& checkpoint, const MoeLayerPlan& layer);

}  // namespace moequant
