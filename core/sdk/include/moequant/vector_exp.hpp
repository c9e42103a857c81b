// exp over many float32 values with the bits of std::exp, on the active ISA tier's vector
// kernel (cpu_isa.hpp). A softmax or a gated activation that calls std::exp one value at a time
// spends most of its time in libm: the calibration forward's attention takes hundreds of
// millions of exps a layer. The kernels repeat glibc's expf (2.27 and later, its FMA build,
// which glibc itself runs on every CPU our vector tiers need) step for step, so the values are
// the same whether a kernel or libm computes them.
#pragma once

#include <moequant/export.hpp>

#include <cstddef>

namespace moequant {

// y[i] = std::exp(x[i]) for i < n; x and y may be the same buffer.
MOEQUANT_API void exp_values(const float* x, float* y, std::size_t n) noexcept;

}  // namespace moequant
