// An expert matrix from its decoded threadpool parts: the inverse of split_expert_part (gate
// and up are split by rows, down by columns), for whatever reads a kt output's parts back as
// whole matrices (eval, sequential calibration of a multi-part output).
#pragma once

#include <moequant/model_adapter.hpp>
#include <moequant/tensor.hpp>

#include <vector>

namespace moequant {

// pieces: the parts in order, F32, each [rows / n, cols] (gate, up) or [rows, cols / n] (down).
// Error(internal) when they do not have one shape.
Tensor join_expert_parts(const std::vector<Tensor>& pieces, Projection projection);

}  // namespace moequant
