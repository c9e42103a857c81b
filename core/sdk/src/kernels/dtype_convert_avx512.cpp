// Bulk element conversions, AVX-512 F/BW/VL/DQ (16 lanes). Compiled with the AVX-512 flags.
#include "kernels/kernels.hpp"
#include "kernels/lanes_avx512.hpp"

namespace moequant::kernels::MOEQUANT_AVX512_KERNELS {
namespace {

using namespace lanes;

// In each loop, `tail` is empty for a full group and holds the lane mask for the last one.
template <class Decode> void bytes_to_f32(const std::byte* src, float* dst, std::size_t n, Decode decode) {
    for_each_group(n, [&](std::size_t i, auto... tail) {
        store_16_f32(dst + i, decode(load_16_u8(src + i, tail...)), tail...);
    });
}

template <class Decode> void u16_to_f32(const std::byte* src, float* dst, std::size_t n, Decode decode) {
    for_each_group(n, [&](std::size_t i, auto... tail) {
        store_16_f32(dst + i, decode(load_16_u16(src + 2 * i, tail...)), tail...);
    });
}

template <class Encode> void f32_to_u16(const float* src, std::byte* dst, std::size_t n, Encode encode) {
    for_each_group(n, [&](std::size_t i, auto... tail) {
        store_16_u16(dst + 2 * i, encode(load_16_f32(src + i, tail...)), tail...);
    });
}

}  // namespace

#include "kernels/dtype_convert_entries.inc"

}  // namespace moequant::kernels::MOEQUANT_AVX512_KERNELS
