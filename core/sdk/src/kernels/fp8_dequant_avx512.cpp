// One row of FP8 block dequantization, AVX-512 (16 lanes). Compiled with the AVX-512 flags.
#include "kernels/kernels.hpp"
#include "kernels/lanes_avx512.hpp"

namespace moequant::kernels::MOEQUANT_AVX512_KERNELS {
namespace {

using namespace lanes;

// dst[j] = bf16(decode(src[j]) * column_scale[j]) with one F32 multiply per element (no FMA).
// The last group is masked: masked-off lanes are neither read nor written.
template <class Decode>
void scaled_to_bf16(const std::byte* src, const float* column_scale, std::uint16_t* dst, std::size_t n,
                    Decode decode) {
    auto* out = reinterpret_cast<std::byte*>(dst);
    for_each_group(n, [&](std::size_t j, auto... tail) {
        const __m512 weight = _mm512_castsi512_ps(decode(load_16_u8(src + j, tail...)));
        const __m512 product = _mm512_mul_ps(weight, load_16_f32(column_scale + j, tail...));
        store_16_u16(out + 2 * j, lanes::f32_to_bf16(product), tail...);
    });
}

}  // namespace

#include "kernels/fp8_dequant_entries.inc"

}  // namespace moequant::kernels::MOEQUANT_AVX512_KERNELS
