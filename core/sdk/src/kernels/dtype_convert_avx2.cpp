// Bulk element conversions, AVX2 + F16C (8 lanes). Compiled with -mavx2 -mfma -mf16c.
#include "kernels/kernels.hpp"
#include "kernels/lanes_avx2.hpp"

namespace moequant::kernels::avx2 {
namespace {

using namespace lanes;

std::byte* bytes_of(float* p) { return reinterpret_cast<std::byte*>(p); }
const std::byte* bytes_of(const float* p) { return reinterpret_cast<const std::byte*>(p); }

template <class Decode> void bytes_to_f32(const std::byte* src, float* dst, std::size_t n, Decode decode) {
    for_each_group<8, 1, 4>(src, bytes_of(dst), n, [&](const std::byte* in, std::byte* out) {
        store_32_bytes(out, decode(load_8_bytes(in)));
    });
}

template <class Decode> void u16_to_f32(const std::byte* src, float* dst, std::size_t n, Decode decode) {
    for_each_group<8, 2, 4>(src, bytes_of(dst), n, [&](const std::byte* in, std::byte* out) {
        store_32_bytes(out, decode(load_16_bytes(in)));
    });
}

template <class Encode> void f32_to_u16(const float* src, std::byte* dst, std::size_t n, Encode encode) {
    for_each_group<8, 4, 2>(bytes_of(src), dst, n, [&](const std::byte* in, std::byte* out) {
        store_16_bytes(out, encode(_mm256_loadu_ps(reinterpret_cast<const float*>(in))));
    });
}

}  // namespace

#include "kernels/dtype_convert_entries.inc"

}  // namespace moequant::kernels::avx2
