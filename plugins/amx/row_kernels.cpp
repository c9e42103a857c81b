// Run-time choice among the row kernel versions (the CPU check itself is the SDK's active_isa()).
#include "row_kernels.hpp"

namespace moequant::amx {

const RowKernels& row_kernels(Isa isa) noexcept {
    switch (isa) {
        case Isa::avx512: return avx512_row_kernels;
        case Isa::avx2: return avx2_row_kernels;
        case Isa::scalar: break;
    }
    return scalar_row_kernels;
}

}  // namespace moequant::amx
