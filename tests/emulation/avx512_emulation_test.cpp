// The AVX-512 kernels, run over SIMDe (see CMakeLists.txt here), against the scalar reference,
// bit for bit: element conversions, FP8 block-scaled rows and the AMX row kernels.
#define BOOST_TEST_MODULE moequant AVX-512 kernels over emulation
#include <boost/test/unit_test.hpp>

#include <moequant/dtype_convert.hpp>

// The emulated copy's declarations (the name its compilation was given).
#define MOEQUANT_AVX512_KERNELS avx512_emulated
#include "kernels/kernels.hpp"
#include "row_kernels.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace moequant::amx {
extern const RowKernels emulated_avx512_row_kernels;
}

using namespace moequant;
namespace emulated = moequant::kernels::avx512_emulated;

namespace {

std::mt19937_64 rng(20261130);

// Every length up to 40 (all tail sizes), some longer ones, each at two source offsets.
const std::size_t lengths[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 40, 255, 1000};

// F32 inputs that exercise rounding and special cases: signed zeros, subnormals, infinities,
// NaNs with payloads, halfway cases, then random bit patterns.
std::vector<float> tricky_floats(std::size_t n) {
    std::vector<std::uint32_t> bits = {0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000,
                                       0x7FC00000, 0x7F800001, 0xFFBFFFFF, 0x3F808000, 0x3F818000, 0x3F80FFFF,
                                       0x477FF000, 0x477FE000, 0x38800000, 0x33800000, 0x7F7FFFFF, 0x4B000001};
    std::uniform_int_distribution<std::uint32_t> any;
    while (bits.size() < n) bits.push_back(any(rng));
    std::vector<float> out(n);
    std::memcpy(out.data(), bits.data(), 4 * n);
    return out;
}

template <class T> std::vector<std::byte> as_bytes(const std::vector<T>& v) {
    std::vector<std::byte> out(v.size() * sizeof(T));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}

// Decodes `n` codes of `code_bytes` bytes each with the emulated kernel and the scalar function,
// from offsets 0 and 1 of the source (unaligned vectors), and compares the F32 bits.
template <class Scalar>
void check_decode(void (*kernel)(const std::byte*, float*, std::size_t) noexcept, Scalar scalar,
                  const std::vector<std::byte>& codes, std::size_t code_bytes, const char* what) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}})
        for (std::size_t n : lengths) {
            const std::size_t count = std::min(n, codes.size() / code_bytes - offset);
            std::vector<float> got(count + 1, 1234.5f);  // one guard element past the end
            kernel(codes.data() + offset * code_bytes, got.data(), count);
            for (std::size_t i = 0; i < count; ++i) {
                std::uint16_t code = 0;
                std::memcpy(&code, codes.data() + (offset + i) * code_bytes, code_bytes);
                BOOST_REQUIRE_MESSAGE(std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(scalar(code)),
                                      what << ": code " << code << " at " << i << " of " << count);
            }
            BOOST_REQUIRE_MESSAGE(got[count] == 1234.5f, what << ": wrote past the end (n = " << count << ")");
        }
}

// All codes of a width, in order, then shuffled (so every lane position sees many codes).
std::vector<std::byte> every_code(std::size_t code_bytes) {
    const std::size_t count = std::size_t{1} << (8 * code_bytes);
    std::vector<std::uint16_t> codes(2 * count);
    for (std::size_t i = 0; i < count; ++i) codes[i] = codes[count + i] = static_cast<std::uint16_t>(i);
    std::shuffle(codes.begin() + static_cast<std::ptrdiff_t>(count), codes.end(), rng);
    std::vector<std::byte> out(codes.size() * code_bytes);
    for (std::size_t i = 0; i < codes.size(); ++i) std::memcpy(out.data() + i * code_bytes, &codes[i], code_bytes);
    return out;
}

template <class Scalar>
void check_encode(void (*kernel)(const float*, std::byte*, std::size_t) noexcept, Scalar scalar, const char* what) {
    const std::vector<float> values = tricky_floats(1 << 16);
    for (std::size_t n : lengths) {
        std::vector<std::uint16_t> got(n + 1, 0xBEEF);
        kernel(values.data() + 1, reinterpret_cast<std::byte*>(got.data()), n);
        for (std::size_t i = 0; i < n; ++i)
            BOOST_REQUIRE_MESSAGE(got[i] == scalar(values[1 + i]),
                                  what << ": input bits 0x" << std::hex << std::bit_cast<std::uint32_t>(values[1 + i]));
        BOOST_REQUIRE_MESSAGE(got[n] == 0xBEEF, what << ": wrote past the end (n = " << n << ")");
    }
    std::vector<std::uint16_t> got(values.size());
    kernel(values.data(), reinterpret_cast<std::byte*>(got.data()), values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
        BOOST_REQUIRE_MESSAGE(got[i] == scalar(values[i]),
                              what << ": input bits 0x" << std::hex << std::bit_cast<std::uint32_t>(values[i]));
}

// BF16 rows with signed zeros, infinities, NaNs, values that saturate or land on rounding ties
// once scaled, and random finite values of mixed magnitudes.
std::vector<std::uint16_t> tricky_bf16_row(std::size_t k) {
    std::vector<std::uint16_t> row(k);
    std::uniform_int_distribution<int> pick(0, 99);
    std::uniform_int_distribution<std::uint16_t> any;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : row) {
        const int p = pick(rng);
        if (p == 0) v = 0x8000;
        else if (p == 1) v = 0x7F80;
        else if (p == 2) v = 0xFFC1;
        else if (p < 6) v = any(rng);
        else v = f32_to_bf16(normal(rng) * (p < 50 ? 1.0f : 0.01f));
    }
    return row;
}

}  // namespace

BOOST_AUTO_TEST_CASE(element_conversions_match_the_scalar_reference) {
    check_decode(emulated::bf16_to_f32, [](std::uint16_t c) { return bf16_to_f32(c); }, every_code(2), 2, "bf16->f32");
    check_decode(emulated::f16_to_f32, [](std::uint16_t c) { return f16_to_f32(c); }, every_code(2), 2, "f16->f32");
    check_decode(emulated::f8_e4m3_to_f32, [](std::uint16_t c) { return f8_e4m3_to_f32(static_cast<std::uint8_t>(c)); },
                 every_code(1), 1, "e4m3->f32");
    check_decode(emulated::f8_e5m2_to_f32, [](std::uint16_t c) { return f8_e5m2_to_f32(static_cast<std::uint8_t>(c)); },
                 every_code(1), 1, "e5m2->f32");
    check_decode(emulated::f8_e8m0_to_f32, [](std::uint16_t c) { return f8_e8m0_to_f32(static_cast<std::uint8_t>(c)); },
                 every_code(1), 1, "e8m0->f32");
    check_encode(emulated::f32_to_bf16, [](float v) { return f32_to_bf16(v); }, "f32->bf16");
    check_encode(emulated::f32_to_f16, [](float v) { return f32_to_f16(v); }, "f32->f16");
}

BOOST_AUTO_TEST_CASE(fp8_scaled_rows_match_the_scalar_reference) {
    const std::vector<std::byte> codes = every_code(1);
    std::vector<float> scales = tricky_floats(codes.size());
    std::uniform_real_distribution<float> finite(1e-6f, 1e3f);
    for (std::size_t i = 0; i < scales.size(); i += 2) scales[i] = finite(rng);  // half ordinary scales
    using Kernel = void (*)(const std::byte*, const float*, std::uint16_t*, std::size_t) noexcept;
    const std::pair<Kernel, float (*)(std::uint8_t) noexcept> formats[] = {
        {emulated::f8_e4m3_scaled_to_bf16, &f8_e4m3_to_f32}, {emulated::f8_e5m2_scaled_to_bf16, &f8_e5m2_to_f32}};
    for (const auto& [kernel, decode] : formats)
        for (std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{16}, std::size_t{37}, codes.size() - 1}) {
            std::vector<std::uint16_t> got(n + 1, 0xBEEF);
            kernel(codes.data() + 1, scales.data() + 1, got.data(), n);
            for (std::size_t i = 0; i < n; ++i) {
                const auto code = static_cast<std::uint8_t>(codes[1 + i]);
                BOOST_REQUIRE_MESSAGE(got[i] == f32_to_bf16(decode(code) * scales[1 + i]),
                                      "code " << int(code) << " scale bits 0x" << std::hex
                                              << std::bit_cast<std::uint32_t>(scales[1 + i]));
            }
            BOOST_REQUIRE(got[n] == 0xBEEF);
        }
}

BOOST_AUTO_TEST_CASE(amx_row_kernels_match_the_scalar_reference) {
    const amx::RowKernels& scalar = amx::scalar_row_kernels;
    const amx::RowKernels& avx512 = amx::emulated_avx512_row_kernels;
    for (std::size_t k : {128, 256, 384, 2048, 7168}) {
        for (int trial = 0; trial < 4; ++trial) {
            std::vector<std::uint16_t> values = tricky_bf16_row(k + 1);
            if (trial == 3) values.assign(k + 1, f32_to_bf16(-0.0f));  // an all-zero row
            const auto* row = reinterpret_cast<const std::byte*>(values.data() + (trial % 2));  // unaligned too
            const float amax = scalar.amax(row, k);
            BOOST_REQUIRE_EQUAL(std::bit_cast<std::uint32_t>(avx512.amax(row, k)), std::bit_cast<std::uint32_t>(amax));
            // The quantizer's scales, plus ones that saturate and ones that land on rounding ties.
            for (float inv : {127.0f / (amax > 0 ? amax : 1.0f), 112.0f / (amax > 0 ? amax : 1.0f), 1e30f, 0.5f, 1.0f}) {
                std::vector<std::int8_t> want8(k), got8(k);
                scalar.quantize_int8(row, k, inv, want8.data());
                avx512.quantize_int8(row, k, inv, got8.data());
                BOOST_REQUIRE_MESSAGE(want8 == got8, "int8 codes differ, k = " << k << ", inv = " << inv);
                std::vector<std::uint8_t> want4(k / 2), got4(k / 2);
                scalar.quantize_int4(row, k, inv, want4.data());
                avx512.quantize_int4(row, k, inv, got4.data());
                BOOST_REQUIRE_MESSAGE(want4 == got4, "int4 bytes differ, k = " << k << ", inv = " << inv);
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(amx_panel_transpose_matches_the_scalar_reference) {
    std::uniform_int_distribution<int> byte(0, 255);
    for (std::size_t row_stride : {64, 192, 7168}) {
        std::vector<std::uint8_t> rows(16 * row_stride);
        for (auto& b : rows) b = static_cast<std::uint8_t>(byte(rng));
        alignas(64) std::uint8_t want[1024], got[1024 + 64];
        amx::scalar_row_kernels.transpose_panel(rows.data(), row_stride, want);
        for (std::size_t offset : {0, 64, 4}) {  // streaming (aligned) and plain stores
            amx::emulated_avx512_row_kernels.transpose_panel(rows.data(), row_stride, got + offset);
            amx::emulated_avx512_row_kernels.finish_panels();
            BOOST_REQUIRE_MESSAGE(std::memcmp(want, got + offset, 1024) == 0,
                                  "stride " << row_stride << ", panel offset " << offset);
        }
    }
}
