// verify --gemv for the AMX layouts: y = W x read straight from the packed code bytes, once and
// in storage order, the way kt-kernel's AMX kernels stream B tiles (kt-cpu-format.md §4.3):
// N-blocks, K-blocks inside them, row groups of 32, W-wide tiles, two 16-row panels, 16 lines
// of 64 bytes, each line holding 4 consecutive k-values of every row of the panel. It does not
// use the index formula dequantize() uses, so the two check each other.
#include "amx_quantizer.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace moequant::amx {

bool AmxQuantizer::packed_gemv(const QuantizedTensor& quantized, const Shape& shape, const float* x, float* y) const {
    const auto [codes, d, n, k] = packed_parts(quantized, shape);
    const LayoutConstants c = constants(method_);
    std::vector<double> sum(static_cast<std::size_t>(n), 0.0);  // sum of code * x per row
    const std::uint8_t* p = codes;
    for (std::int64_t nb = 0; nb < n; nb += c.n_block) {
        const std::int64_t nbs = std::min(c.n_block, n - nb);
        for (std::int64_t kb = 0; kb < k; kb += c.k_block) {
            const std::int64_t kbs = std::min(c.k_block, k - kb);
            for (std::int64_t ns = 0; ns < nbs; ns += c.n_step)
                for (std::int64_t kt = 0; kt < kbs; kt += c.tile_k)
                    for (std::int64_t panel = 0; panel < 2; ++panel)
                        for (std::int64_t line = 0; line < 16; ++line)
                            for (std::int64_t i = 0; i < 16; ++i) {
                                double& acc = sum[static_cast<std::size_t>(nb + ns + 16 * panel + i)];
                                const float* xs = x + kb + kt + 4 * line;
                                for (int b = 0; b < 4; ++b, ++p) {
                                    if (method_ == Method::int8) {
                                        acc += static_cast<std::int8_t>(*p) * static_cast<double>(xs[b]);
                                    } else {
                                        // The low nibble is column j, the high one column j + 64;
                                        // both sign-extended and scaled by 16 as the kernel does.
                                        const int low = static_cast<std::int8_t>(*p << 4) >> 4;
                                        const int high = static_cast<std::int8_t>(*p & 0xF0) >> 4;
                                        acc += 16.0 * (low * static_cast<double>(xs[b]) + high * static_cast<double>(xs[b + 64]));
                                    }
                                }
                            }
        }
    }
    for (std::int64_t r = 0; r < n; ++r) y[r] = static_cast<float>(sum[static_cast<std::size_t>(r)] * d[r]);
    return true;
}

}  // namespace moequant::amx
