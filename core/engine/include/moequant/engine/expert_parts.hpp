// An expert matrix from its decoded threadpool parts: the inverse of split_expert_part (gate
// and up are split by rows, down by columns), for whatever reads a kt output's parts back as
// whole matrices (eval, sequential calibration of a multi-part output).
#pragma once

#include <moequant/model_adapter.hpp>
#include <moequant/tensor.hpp>

#include <span>
#include <vector>

namespace moequant {

// pieces: the parts in order, F32, each [rows / n, cols] (gate, up) or [rows, cols / n] (down).
// Error(internal) when they do not have one shape.
Tensor join_expert_parts(const std::vector<Tensor>& pieces, Projection projection);

// The column weights (one per input column of the whole matrix) that threadpool part `part` of
// `parts` sees: down_proj's parts split its columns, the others keep them all.
std::span<const float> part_columns(std::span<const float> weights, Projection projection, int part, int parts);

}  // namespace moequant
