// GPTQ's preparation of a Hessian (gptq-compressed-tensors.md §4.2, up to the column loop):
// column order, dead columns, dampening and U, the upper Cholesky factor of H^-1. It depends
// on H only, so one InverseHessian serves every matrix that saw the same inputs (all experts'
// gate and up projections of a layer).
#pragma once

#include "gptq_scheme.hpp"

#include <moequant/quantizer.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <vector>

namespace moequant::gptq {

struct InverseHessian final : PreparedCalibration {
    std::int64_t columns = 0;
    // order[j]: the original column quantized at position j (descending diag(H) with actorder,
    // else the identity).
    std::vector<std::int32_t> order;
    // dead[j]: position j's column never saw a non-zero input (diag(H) == 0): its weights are
    // zeroed before the loop.
    std::vector<std::uint8_t> dead;
    // U, F32 row-major [columns, columns] in the permuted order, upper triangle, zeros below
    // (U^T U = H^-1 of the dead-fixed, damped, permuted H). The identity when H was not
    // positive definite.
    Tensor upper;
    bool factored = true;
};

// H: F32 [K, K] symmetric (2/n * sum x x^T). Uses scheme.actorder and scheme.dampening_frac.
InverseHessian prepare_inverse_hessian(const Tensor& hessian, const Scheme& scheme);

}  // namespace moequant::gptq
