#include <moequant/cpu_isa.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include "kernels/kernels.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

namespace moequant {
namespace {

constexpr std::uint32_t f32_abs = 0x7FFFFFFFu;
constexpr std::uint32_t f32_inf = 0x7F800000u;
constexpr std::uint32_t f32_quiet = 0x00400000u;
constexpr std::uint32_t f32_default_nan = 0x7FC00000u;

float from_bits(std::uint32_t bits) noexcept { return std::bit_cast<float>(bits); }

// A finite value of a small binary float format as F32 bits (exact: every such value fits).
// exponent == 0 is the subnormal range, mantissa × 2^(1 - bias - mantissa_bits).
std::uint32_t small_float_bits(std::uint32_t sign, std::uint32_t exponent, std::uint32_t mantissa,
                               int mantissa_bits, int bias) noexcept {
    if (exponent != 0) {
        const auto f32_exponent = static_cast<std::uint32_t>(static_cast<int>(exponent) - bias + 127);
        return sign | f32_exponent << 23 | mantissa << (23 - mantissa_bits);
    }
    if (mantissa == 0) return sign;
    // Normalise: the highest set bit becomes the implicit one.
    const int top = std::bit_width(mantissa) - 1;
    const auto f32_exponent = static_cast<std::uint32_t>(top + 1 - bias - mantissa_bits + 127);
    return sign | f32_exponent << 23 | ((mantissa << (23 - top)) & 0x7FFFFFu);
}

// Unaligned element access for the scalar loops (sources come straight from mapped files).
template <class T> T load(const void* base, std::size_t index) noexcept {
    T value;
    std::memcpy(&value, static_cast<const std::byte*>(base) + index * sizeof(T), sizeof(T));
    return value;
}
template <class T> void store(void* base, std::size_t index, T value) noexcept {
    std::memcpy(static_cast<std::byte*>(base) + index * sizeof(T), &value, sizeof(T));
}

// One bulk conversion: the kernel of the active ISA tier, or on a CPU with neither the scalar
// reference `one` (From -> To) over unaligned elements.
template <class From, class To, class Src, class Dst>
void convert_bulk(void (*avx512)(Src, Dst, std::size_t) noexcept, void (*avx2)(Src, Dst, std::size_t) noexcept,
                  To (*one)(From) noexcept, const void* src, void* dst, std::size_t n) noexcept {
    switch (active_isa()) {
        case Isa::avx512: return avx512(static_cast<Src>(src), static_cast<Dst>(dst), n);
        case Isa::avx2: return avx2(static_cast<Src>(src), static_cast<Dst>(dst), n);
        case Isa::scalar: break;
    }
    for (std::size_t i = 0; i < n; ++i) store(dst, i, one(load<From>(src, i)));
}

}  // namespace

// ---- one value ----

float bf16_to_f32(std::uint16_t bits) noexcept {
    std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    if ((u & f32_abs) > f32_inf) u |= f32_quiet;
    return from_bits(u);
}

std::uint16_t f32_to_bf16(float value) noexcept {
    const auto u = std::bit_cast<std::uint32_t>(value);
    if ((u & f32_abs) > f32_inf) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    // Adding 0x7FFF plus the kept LSB rounds to nearest even; a carry out of the mantissa
    // bumps the exponent, which is also how the largest finite values round up to Inf.
    return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float f16_to_f32(std::uint16_t bits) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
    const std::uint32_t mantissa = bits & 0x3FFu;
    if (exponent == 0x1F) {
        if (mantissa == 0) return from_bits(sign | f32_inf);
        return from_bits(sign | f32_inf | f32_quiet | mantissa << 13);
    }
    return from_bits(small_float_bits(sign, exponent, mantissa, 10, 15));
}

std::uint16_t f32_to_f16(float value) noexcept {
    const auto u = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
    const std::uint32_t a = u & f32_abs;
    if (a > f32_inf) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
    // 65520 = 0x477FF000 is halfway between the largest F16 (65504, odd mantissa) and 2^16:
    // from there on everything rounds to Inf.
    if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
    if (a >= 0x38800000u) {  // F16 normal range (2^-14 and up): rebias, round 13 bits away
        const std::uint32_t rebiased = a - (112u << 23);
        return static_cast<std::uint16_t>(sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13));
    }
    // Subnormal result: a count of 2^-24 units. 2^-25 (0x33000000) and below is a tie or less
    // towards zero, and zero is even.
    if (a <= 0x33000000u) return sign;
    const std::uint32_t exponent = a >> 23;                // 102 ..= 112
    const std::uint32_t significand = (a & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;            // 14 ..= 24
    std::uint32_t units = significand >> shift;
    const std::uint32_t rest = significand & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (units & 1u))) ++units;  // may reach 0x400, the min normal
    return static_cast<std::uint16_t>(sign | units);
}

std::uint8_t f32_to_f8_e4m3(float value) noexcept {
    const auto u = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
    const std::uint32_t a = u & f32_abs;
    if (a > f32_inf) return static_cast<std::uint8_t>(sign | 0x7Fu);
    if (a < 0x3C800000u) {  // below 2^-6: subnormal codes count units of 2^-9 (a*512 is exact)
        const float units = std::nearbyint(std::bit_cast<float>(a) * 512.0f);  // ties to even
        return static_cast<std::uint8_t>(sign | static_cast<std::uint32_t>(units));  // 8 units = 0x08
    }
    // Round the F32 significand to 3 bits (nearest even); a carry moves into the exponent.
    const std::uint32_t r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
    const std::int32_t exponent = static_cast<std::int32_t>(r >> 3) - 127 + 7;
    const std::uint32_t mantissa = r & 7u;
    if (exponent > 15 || (exponent == 15 && mantissa == 7)) return static_cast<std::uint8_t>(sign | 0x7Eu);
    return static_cast<std::uint8_t>(sign | static_cast<std::uint32_t>(exponent) << 3 | mantissa);
}

float f8_e4m3_to_f32(std::uint8_t bits) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x80u) << 24;
    if ((bits & 0x7Fu) == 0x7Fu) return from_bits(sign | f32_default_nan);
    return from_bits(small_float_bits(sign, (bits >> 3) & 0xFu, bits & 0x7u, 3, 7));
}

float f8_e5m2_to_f32(std::uint8_t bits) noexcept {
    return f16_to_f32(static_cast<std::uint16_t>(bits << 8));
}

float f8_e8m0_to_f32(std::uint8_t bits) noexcept {
    if (bits == 0xFF) return from_bits(f32_default_nan);
    if (bits == 0) return from_bits(0x00400000u);  // 2^-127 is an F32 subnormal
    return from_bits(static_cast<std::uint32_t>(bits) << 23);
}

float f8_e4m3fnuz_to_f32(std::uint8_t bits) noexcept {
    if (bits == 0x80) return from_bits(f32_default_nan);
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x80u) << 24;
    return from_bits(small_float_bits(sign, (bits >> 3) & 0xFu, bits & 0x7u, 3, 8));
}

float f8_e5m2fnuz_to_f32(std::uint8_t bits) noexcept {
    if (bits == 0x80) return from_bits(f32_default_nan);
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x80u) << 24;
    return from_bits(small_float_bits(sign, (bits >> 2) & 0x1Fu, bits & 0x3u, 2, 16));
}

// ---- bulk ----

void convert_bf16_to_f32(const void* src, float* dst, std::size_t n) noexcept {
    convert_bulk(kernels::avx512::bf16_to_f32, kernels::avx2::bf16_to_f32, bf16_to_f32, src, dst, n);
}

void convert_f32_to_bf16(const float* src, void* dst, std::size_t n) noexcept {
    convert_bulk(kernels::avx512::f32_to_bf16, kernels::avx2::f32_to_bf16, f32_to_bf16, src, dst, n);
}

void convert_f16_to_f32(const void* src, float* dst, std::size_t n) noexcept {
    convert_bulk(kernels::avx512::f16_to_f32, kernels::avx2::f16_to_f32, f16_to_f32, src, dst, n);
}

void convert_f32_to_f16(const float* src, void* dst, std::size_t n) noexcept {
    convert_bulk(kernels::avx512::f32_to_f16, kernels::avx2::f32_to_f16, f32_to_f16, src, dst, n);
}

void convert_f8_e4m3_to_f32(const void* src, float* dst, std::size_t n) noexcept {
    convert_bulk(kernels::avx512::f8_e4m3_to_f32, kernels::avx2::f8_e4m3_to_f32, f8_e4m3_to_f32, src, dst, n);
}

void convert_f8_e5m2_to_f32(const void* src, float* dst, std::size_t n) noexcept {
    convert_bulk(kernels::avx512::f8_e5m2_to_f32, kernels::avx2::f8_e5m2_to_f32, f8_e5m2_to_f32, src, dst, n);
}

void convert_f8_e8m0_to_f32(const void* src, float* dst, std::size_t n) noexcept {
    convert_bulk(kernels::avx512::f8_e8m0_to_f32, kernels::avx2::f8_e8m0_to_f32, f8_e8m0_to_f32, src, dst, n);
}

// ---- whole views ----

namespace {

// Large views are split so several cores share the (memory-bound) work; each chunk is
// converted independently, so the result does not depend on the split.
constexpr std::size_t decode_grain = std::size_t{1} << 20;

template <class Body> void for_each_chunk(std::size_t n, Body body) {
    parallel_for(0, n, decode_grain, [&](std::size_t begin, std::size_t end) { body(begin, end - begin); });
}

bool decodable(DType dtype) noexcept {
    switch (dtype) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::F64:
        case DType::F8_E4M3: case DType::F8_E5M2: case DType::F8_E8M0:
        case DType::F8_E4M3FNUZ: case DType::F8_E5M2FNUZ:
            return true;
        default:
            return false;
    }
}

void check_decodable(const TensorView& src, std::size_t dst_size, std::string_view target) {
    const std::string what = std::string(dtype_name(src.dtype)) + " " + shape_to_string(src.shape);
    if (!decodable(src.dtype))
        throw_input_error("cannot decode " + what + " to " + std::string(target) +
                          ": no conversion is defined for " + std::string(dtype_name(src.dtype)));
    const auto elements = shape_elements(src.shape);
    const auto bytes = elements ? dtype_byte_size(src.dtype, *elements) : std::nullopt;
    if (!bytes || *bytes != src.bytes.size())
        throw_input_error("cannot decode " + what + ": the view holds " + std::to_string(src.bytes.size()) +
                          " bytes" + (bytes ? " but needs " + std::to_string(*bytes) : std::string()));
    if (*elements != dst_size)
        throw_input_error("cannot decode " + what + " (" + std::to_string(*elements) + " values) into a " +
                          std::string(target) + " buffer of " + std::to_string(dst_size) + " values");
}

// For the 8-bit types without a vector kernel: a lookup table built once per call.
using ByteTable = std::array<float, 256>;
ByteTable byte_table(float (*decode)(std::uint8_t) noexcept) noexcept {
    ByteTable table{};
    for (unsigned b = 0; b < 256; ++b) table[b] = decode(static_cast<std::uint8_t>(b));
    return table;
}

// Decodes `count` values starting at element `first` of a decodable view.
void decode_range(const TensorView& src, std::size_t first, std::size_t count, float* dst,
                  const ByteTable* table) noexcept {
    const std::byte* base = src.data();
    switch (src.dtype) {
        case DType::F32:
            if (count) std::memcpy(dst, base + first * 4, count * 4);
            return;
        case DType::F16: return convert_f16_to_f32(base + first * 2, dst, count);
        case DType::BF16: return convert_bf16_to_f32(base + first * 2, dst, count);
        case DType::F64:
            // static_cast rounds to nearest even and keeps the sign of a NaN (quieted).
            for (std::size_t i = 0; i < count; ++i)
                store(dst, i, static_cast<float>(load<double>(base, first + i)));
            return;
        case DType::F8_E4M3: return convert_f8_e4m3_to_f32(base + first, dst, count);
        case DType::F8_E5M2: return convert_f8_e5m2_to_f32(base + first, dst, count);
        case DType::F8_E8M0: return convert_f8_e8m0_to_f32(base + first, dst, count);
        default:  // the FNUZ types
            for (std::size_t i = 0; i < count; ++i)
                store(dst, i, (*table)[load<std::uint8_t>(base, first + i)]);
            return;
    }
}

std::optional<ByteTable> table_for(DType dtype) noexcept {
    if (dtype == DType::F8_E4M3FNUZ) return byte_table(f8_e4m3fnuz_to_f32);
    if (dtype == DType::F8_E5M2FNUZ) return byte_table(f8_e5m2fnuz_to_f32);
    return std::nullopt;
}

}  // namespace

void decode_to_f32(const TensorView& src, std::span<float> dst) {
    check_decodable(src, dst.size(), "F32");
    const auto table = table_for(src.dtype);
    for_each_chunk(dst.size(), [&](std::size_t first, std::size_t count) {
        decode_range(src, first, count, dst.data() + first, table ? &*table : nullptr);
    });
}

void decode_to_bf16(const TensorView& src, std::span<std::uint16_t> dst) {
    check_decodable(src, dst.size(), "BF16");
    if (src.dtype == DType::BF16) {
        if (!dst.empty()) std::memcpy(dst.data(), src.data(), src.size_bytes());
        return;
    }
    const auto table = table_for(src.dtype);
    for_each_chunk(dst.size(), [&](std::size_t first, std::size_t count) {
        // Through F32 in pieces that stay in L1 (exact for FP8 and F16; F64 rounds twice).
        constexpr std::size_t piece = 4096;
        std::array<float, piece> buffer;
        for (std::size_t done = 0; done < count; done += piece) {
            const std::size_t m = std::min(piece, count - done);
            decode_range(src, first + done, m, buffer.data(), table ? &*table : nullptr);
            convert_f32_to_bf16(buffer.data(), dst.data() + first + done, m);
        }
    });
}

}  // namespace moequant
