// One row of FP8 block dequantization, AVX2 (8 lanes). Compiled with -mavx2 -mfma -mf16c.
#include "kernels/kernels.hpp"
#include "kernels/lanes_avx2.hpp"

namespace moequant::kernels::avx2 {
namespace {

// dst[j] = bf16(decode(src[j]) * column_scale[j]) with one F32 multiply per element (no FMA).
template <class Decode>
void scaled_to_bf16(const std::byte* src, const float* column_scale, std::uint16_t* dst, std::size_t n,
                    Decode decode) {
    const auto step = [&](const std::byte* in, const float* scale, std::byte* out) {
        const __m256 weight = _mm256_castsi256_ps(decode(lanes::load_8_bytes(in)));
        lanes::store_16_bytes(out, lanes::f32_to_bf16(_mm256_mul_ps(weight, _mm256_loadu_ps(scale))));
    };
    auto* out = reinterpret_cast<std::byte*>(dst);
    std::size_t j = 0;
    for (; j + 8 <= n; j += 8) step(src + j, column_scale + j, out + 2 * j);
    if (j == n) return;
    // The tail goes through zero-padded copies: nothing past the row is read or written.
    const std::size_t rest = n - j;
    alignas(32) std::byte in[8] = {};
    alignas(32) float scale[8] = {};
    alignas(32) std::byte result[16];
    std::memcpy(in, src + j, rest);
    std::memcpy(scale, column_scale + j, rest * sizeof(float));
    step(in, scale, result);
    std::memcpy(out + 2 * j, result, rest * 2);
}

}  // namespace

#include "kernels/fp8_dequant_entries.inc"

}  // namespace moequant::kernels::avx2
