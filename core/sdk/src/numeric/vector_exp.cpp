#include "kernels/kernels.hpp"

#include <moequant/cpu_isa.hpp>
#include <moequant/vector_exp.hpp>

#include <cmath>

namespace moequant {

void exp_values(const float* x, float* y, std::size_t n) noexcept {
    switch (active_isa()) {
        case Isa::avx512: return kernels::avx512::exp_f32(x, y, n);
        case Isa::avx2: return kernels::avx2::exp_f32(x, y, n);
        case Isa::scalar: break;
    }
    for (std::size_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

}  // namespace moequant
