// Which kernels the FP32 matrix products run. Eigen sends its large float products (Hessians,
// the Cholesky factor and triangular inverse, GPTQ's updates, the FP32 forward) to Debian's
// serial BLIS, which picks a kernel set from a table of CPU models. A CPU newer than that table
// (BLIS 0.9 and Zen 5 or Granite Rapids) gets BLIS's generic C kernels, about a fifth of its
// AVX-512 ones there. So the SDK chooses by instruction set when it is loaded, before any
// product runs: with AVX-512 F/BW/DQ/VL it asks BLIS for its skx kernels (BLIS 0.9's only
// AVX-512 sgemm); otherwise BLIS's own choice stands, as it does when the user has set
// BLIS_ARCH_TYPE. MOEQUANT_ISA caps moequant's own kernels, not BLIS's.
#pragma once

#include <moequant/export.hpp>

#include <string>

namespace moequant {

// What runs the FP32 products, e.g. "BLIS 0.9.0 skx": for --version, run manifests and the
// cluster's check that every rank sums in the same order.
MOEQUANT_API std::string blas_kernels();

// Who chose them: "moequant, for AVX-512", "BLIS_ARCH_TYPE" or "BLIS, for this CPU model".
MOEQUANT_API std::string blas_kernels_chosen_by();

}  // namespace moequant
