// Element conversions: the scalar reference against independent formulas, and every vector
// path (each ISA this CPU has) against the scalar reference, bit for bit.
#include <moequant/cpu_isa.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>

#include "test_support.hpp"

#include "isa_limit_restorer.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include <xmmintrin.h>

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace moequant;

namespace {

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float float_of(std::uint32_t u) { return std::bit_cast<float>(u); }

std::string hex(std::uint64_t v) {
    std::ostringstream s;
    s << "0x" << std::hex << v;
    return s.str();
}

using moequant::test::IsaLimitRestorer;

// Runs check() once per available ISA with that ISA active.
void for_each_isa(const std::function<void(Isa)>& check) {
    IsaLimitRestorer restore;
    for (Isa isa : available_isas()) {
        set_isa_limit(isa);
        BOOST_TEST_CONTEXT("isa " << isa_name(isa)) {
            BOOST_REQUIRE(active_isa() == isa);
            check(isa);
        }
    }
}

// Reports the first few positions where got != want (one assertion for a whole array).
template <class T>
void expect_same(const std::vector<T>& got, const std::vector<T>& want, const std::vector<std::uint64_t>& inputs,
                 const std::string& what) {
    BOOST_REQUIRE_EQUAL(got.size(), want.size());
    std::size_t mismatches = 0;
    std::ostringstream first;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (got[i] == want[i]) continue;
        if (mismatches++ < 5)
            first << " [" << i << "] in " << hex(inputs[i]) << " got " << hex(got[i]) << " want " << hex(want[i]) << ";";
    }
    BOOST_TEST(mismatches == 0u, what << ": " << mismatches << " mismatches:" << first.str());
}

// A byte buffer whose payload starts `offset` bytes after a 64-byte boundary, so the bulk
// functions see unaligned pointers.
class Unaligned {
public:
    Unaligned(std::size_t size, std::size_t offset) : storage_(size + offset + 64), offset_(offset) {
        auto address = reinterpret_cast<std::uintptr_t>(storage_.data());
        skip_ = static_cast<std::size_t>((64 - address % 64) % 64) + offset_;
    }
    std::byte* data() { return storage_.data() + skip_; }

private:
    std::vector<std::byte> storage_;
    std::size_t offset_;
    std::size_t skip_ = 0;
};

// ---- independent formulas (double arithmetic, libm) ----

// Value of a binary float format with `mantissa_bits` fraction bits, exponent bias `bias`,
// and no special codes (callers handle NaN / Inf first).
double formula_value(unsigned sign, unsigned exponent, unsigned mantissa, int mantissa_bits, int bias) {
    const double magnitude =
        exponent == 0 ? std::ldexp(static_cast<double>(mantissa), 1 - bias - mantissa_bits)
                      : std::ldexp(static_cast<double>(mantissa + (1u << mantissa_bits)),
                                   static_cast<int>(exponent) - bias - mantissa_bits);
    return sign ? -magnitude : magnitude;
}

// Checks a decoded F32 against the exact value (sign of zero included).
void expect_value(float got, double want, const std::string& what) {
    BOOST_TEST((static_cast<double>(got) == want && std::signbit(got) == std::signbit(want)),
               what << ": got " << got << " (" << hex(bits_of(got)) << ") want " << want);
}

// Round to nearest even of a finite double onto a grid whose spacing is 2^(e - fraction_bits)
// for |x| in [2^e, 2^(e+1)), with e clamped below at min_exponent (the subnormal range).
double round_to_format(double x, int fraction_bits, int min_exponent) {
    if (x == 0) return x;
    const int e = std::max(std::ilogb(x), min_exponent);
    const double spacing = std::ldexp(1.0, e - fraction_bits);
    return std::nearbyint(x / spacing) * spacing;  // default rounding mode: ties to even
}

// The independent reference for F32 -> BF16 / F16 of a non-NaN value, as the value it must
// decode to; +-Inf when it overflows.
double narrowed_value(float x, int fraction_bits, int min_exponent, double overflow_at) {
    if (std::isinf(x)) return x;
    double r = round_to_format(static_cast<double>(x), fraction_bits, min_exponent);
    if (std::fabs(r) >= overflow_at) r = std::copysign(HUGE_VAL, r);
    if (r == 0) r = std::copysign(0.0, x);
    return r;
}

// ---- inputs ----

// F32 values on the edges of both narrowing conversions.
std::vector<std::uint32_t> edge_f32_bits() {
    std::vector<std::uint32_t> magnitudes{
        0x00000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F800000,  // zero .. Inf
        0x3F800000, 0x3F7FFFFF, 0x3F800001,
        // BF16: ties to even (down and up), just below / above halfway, subnormal ties, overflow
        0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x3F80FFFF, 0x00008000, 0x00018000,
        0x00007FFF, 0x0000FFFF, 0x00010000, 0x007F8000, 0x007FFFFF, 0x7F7F7FFF, 0x7F7F8000,
        0x7F7F8001, 0x7F7FFFFF, 0x7F000000,
        // F16: max finite, rounding to it and past it, the normal / subnormal border, ties
        0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x47800000, 0x38800000, 0x387FFFFF,
        0x387FC000, 0x387FE000, 0x38000000, 0x33800000, 0x33000000, 0x33000001, 0x32FFFFFF,
        0x33C00000, 0x34200000, 0x34400000, 0x3F801000, 0x3F803000, 0x3F800FFF, 0x3F801001,
        0x387FF000, 0x38002000, 0x38006000, 0x3EAAAAAB, 0x42F6E979,
        // NaNs: quiet, signalling, payloads above and below the kept bits
        0x7FC00000, 0x7F800001, 0x7FA00000, 0x7F812345, 0x7FBFFFFF, 0x7FFFFFFF, 0x7F802000,
        0x7F801000, 0x7F800100, 0x7FC00001, 0x7FD55555,
    };
    std::vector<std::uint32_t> all;
    for (auto m : magnitudes) {
        all.push_back(m);
        all.push_back(m | 0x80000000u);
    }
    return all;
}

// >= 10^6 seeded random bit patterns, plus as many again with exponents around the F16 range
// (uniform patterns rarely land there).
std::vector<std::uint32_t> random_f32_bits() {
    std::mt19937 rng(20240611);
    std::vector<std::uint32_t> values(1'000'003);
    for (auto& v : values) v = static_cast<std::uint32_t>(rng());
    std::uniform_int_distribution<std::uint32_t> exponent(95, 145);
    for (int i = 0; i < 1'000'000; ++i) {
        const auto u = static_cast<std::uint32_t>(rng());
        values.push_back((u & 0x807FFFFFu) | exponent(rng) << 23);
    }
    return values;
}

std::vector<std::uint64_t> widen(const std::vector<std::uint32_t>& v) { return {v.begin(), v.end()}; }

// ---- bulk-vs-scalar drivers ----

using ToF32 = void (*)(const void*, float*, std::size_t) noexcept;

// All codes of a `Code`-typed source type through `bulk` at several alignments and lengths
// (full vectors and every tail length) against `scalar`.
template <class Code>
void check_widening(ToF32 bulk, float (*scalar)(Code) noexcept, const std::string& what) {
    constexpr std::size_t count = std::size_t{1} << (8 * sizeof(Code));
    std::vector<Code> codes(count);
    for (std::size_t i = 0; i < count; ++i) codes[i] = static_cast<Code>(i);
    std::vector<std::uint32_t> want(count);
    for (std::size_t i = 0; i < count; ++i) want[i] = bits_of(scalar(codes[i]));
    std::vector<std::uint64_t> inputs(codes.begin(), codes.end());

    for (std::size_t offset : {0, 1, 3}) {
        // Everything at once, then short runs from several starting points (all tail lengths).
        std::vector<std::pair<std::size_t, std::size_t>> runs{{0, count}, {1, count - 1}};
        for (std::size_t n = 0; n <= 40; ++n) runs.push_back({(n * 7) % (count - 40), n});
        for (auto [first, n] : runs) {
            Unaligned src(n * sizeof(Code), offset);
            if (n) std::memcpy(src.data(), codes.data() + first, n * sizeof(Code));
            // The float destination is misaligned too (by one byte past 4).
            Unaligned dst_bytes(n * sizeof(float) + 4, 4 + offset);
            auto* dst = reinterpret_cast<float*>(dst_bytes.data());
            std::memset(dst_bytes.data(), 0xA5, n * sizeof(float) + 4);
            bulk(src.data(), dst, n);
            std::vector<std::uint32_t> got(n), expected(want.begin() + first, want.begin() + first + n);
            if (n) std::memcpy(got.data(), dst, n * sizeof(float));
            std::vector<std::uint64_t> in(inputs.begin() + first, inputs.begin() + first + n);
            expect_same(got, expected, in, what + " n=" + std::to_string(n) + " offset=" + std::to_string(offset));
            std::uint32_t after;
            std::memcpy(&after, dst_bytes.data() + n * sizeof(float), 4);
            BOOST_TEST(after == 0xA5A5A5A5u, what << " wrote past element " << n);
        }
    }
}

using FromF32 = void (*)(const float*, void*, std::size_t) noexcept;

void check_narrowing(FromF32 bulk, std::uint16_t (*scalar)(float) noexcept, const std::vector<std::uint32_t>& values,
                     const std::string& what) {
    std::vector<std::uint16_t> want(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) want[i] = scalar(float_of(values[i]));
    const auto inputs = widen(values);
    for (std::size_t offset : {0, 2, 1}) {
        std::vector<std::pair<std::size_t, std::size_t>> runs{{0, values.size()}};
        for (std::size_t n = 0; n <= 40; ++n) runs.push_back({(n * 13) % (values.size() - 40), n});
        for (auto [first, n] : runs) {
            Unaligned src(n * 4, offset);
            if (n) std::memcpy(src.data(), values.data() + first, n * 4);
            Unaligned dst(n * 2 + 2, offset + 1);
            std::memset(dst.data(), 0x5A, n * 2 + 2);
            bulk(reinterpret_cast<const float*>(src.data()), dst.data(), n);
            std::vector<std::uint16_t> got(n), expected(want.begin() + first, want.begin() + first + n);
            if (n) std::memcpy(got.data(), dst.data(), n * 2);
            std::vector<std::uint64_t> in(inputs.begin() + first, inputs.begin() + first + n);
            expect_same(got, expected, in, what + " n=" + std::to_string(n) + " offset=" + std::to_string(offset));
            std::uint16_t after;
            std::memcpy(&after, dst.data() + n * 2, 2);
            BOOST_TEST(after == 0x5A5Au, what << " wrote past element " << n);
        }
    }
}

void check_all_bulk_paths_against_scalar() {
    check_widening<std::uint16_t>(convert_bf16_to_f32, bf16_to_f32, "bf16->f32");
    check_widening<std::uint16_t>(convert_f16_to_f32, f16_to_f32, "f16->f32");
    check_widening<std::uint8_t>(convert_f8_e4m3_to_f32, f8_e4m3_to_f32, "e4m3->f32");
    check_widening<std::uint8_t>(convert_f8_e5m2_to_f32, f8_e5m2_to_f32, "e5m2->f32");
    check_widening<std::uint8_t>(convert_f8_e8m0_to_f32, f8_e8m0_to_f32, "e8m0->f32");
    const auto edges = edge_f32_bits();
    check_narrowing(convert_f32_to_bf16, f32_to_bf16, edges, "f32->bf16 edges");
    check_narrowing(convert_f32_to_f16, f32_to_f16, edges, "f32->f16 edges");
}

TensorView view_of(DType dtype, Shape shape, const std::vector<std::byte>& bytes, std::size_t offset = 0) {
    return TensorView{dtype, std::move(shape), std::span<const std::byte>(bytes).subspan(offset)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dtype_convert)

// ---- run-time ISA selection ----

BOOST_AUTO_TEST_CASE(isa_names_round_trip) {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) BOOST_TEST((isa_from_name(isa_name(isa)) == isa));
    BOOST_TEST(isa_name(Isa::avx512) == "avx512");
    BOOST_TEST(!isa_from_name("AVX2").has_value());
    BOOST_TEST(!isa_from_name("").has_value());
    BOOST_TEST(!isa_from_name("sse4").has_value());
}

BOOST_AUTO_TEST_CASE(available_isas_are_ordered_and_limit_caps_active) {
    IsaLimitRestorer restore;
    const auto isas = available_isas();
    BOOST_REQUIRE(!isas.empty());
    BOOST_TEST((isas.front() == Isa::scalar));
    BOOST_TEST((isas.back() == detected_isa()));
    BOOST_TEST(std::is_sorted(isas.begin(), isas.end()));
    BOOST_TEST_MESSAGE("detected ISA: " << isa_name(detected_isa()));
    set_isa_limit(Isa::scalar);
    BOOST_TEST((active_isa() == Isa::scalar));
    set_isa_limit(Isa::avx512);  // a limit above the CPU has no effect
    BOOST_TEST((active_isa() == detected_isa()));
}

// ---- the scalar reference against independent formulas ----

BOOST_AUTO_TEST_CASE(bf16_to_f32_reference_matches_formula_for_all_codes) {
    for (std::uint32_t code = 0; code < 65536; ++code) {
        const unsigned sign = code >> 15, exponent = (code >> 7) & 0xFF, mantissa = code & 0x7F;
        const std::uint32_t got = bits_of(bf16_to_f32(static_cast<std::uint16_t>(code)));
        if (exponent == 0xFF && mantissa != 0) {
            // NaN: quiet bit set, sign and payload kept.
            BOOST_TEST(got == ((code << 16) | 0x00400000u), "code " << hex(code));
            continue;
        }
        if (exponent == 0xFF) {
            BOOST_TEST(got == (sign ? 0xFF800000u : 0x7F800000u));
            continue;
        }
        if (code % 61 == 0 || exponent == 0 || exponent >= 0xFE)  // ldexp on a sample; all edges
            expect_value(float_of(got), formula_value(sign, exponent, mantissa, 7, 127), "bf16 " + hex(code));
        BOOST_TEST(got == code << 16);
    }
}

BOOST_AUTO_TEST_CASE(f16_to_f32_reference_matches_formula_for_all_codes) {
    for (std::uint32_t code = 0; code < 65536; ++code) {
        const unsigned sign = code >> 15, exponent = (code >> 10) & 0x1F, mantissa = code & 0x3FF;
        const float got = f16_to_f32(static_cast<std::uint16_t>(code));
        if (exponent == 0x1F && mantissa != 0) {
            const std::uint32_t want = (sign << 31) | 0x7FC00000u | (mantissa << 13);
            BOOST_TEST(bits_of(got) == want, "code " << hex(code) << " got " << hex(bits_of(got)));
        } else if (exponent == 0x1F) {
            BOOST_TEST(bits_of(got) == (sign ? 0xFF800000u : 0x7F800000u));
        } else {
            expect_value(got, formula_value(sign, exponent, mantissa, 10, 15), "f16 " + hex(code));
        }
    }
#ifdef __FLT16_MAX__
    // The compiler's own _Float16 conversion agrees on every non-NaN code.
    std::size_t native_bad = 0;
    for (std::uint32_t code = 0; code < 65536; ++code) {
        const auto h = static_cast<std::uint16_t>(code);
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;
        _Float16 native;
        std::memcpy(&native, &h, 2);
        if (bits_of(static_cast<float>(native)) != bits_of(f16_to_f32(h)) && native_bad++ < 5)
            BOOST_ERROR("f16 " << hex(code) << " differs from _Float16");
    }
    BOOST_TEST(native_bad == 0u);
#endif
}

BOOST_AUTO_TEST_CASE(narrowing_round_trips_every_16_bit_code) {
    std::size_t bad = 0;
    for (std::uint32_t code = 0; code < 65536; ++code) {
        const auto c = static_cast<std::uint16_t>(code);
        const bool bf16_nan = (c & 0x7F80) == 0x7F80 && (c & 0x7F);
        const bool f16_nan = (c & 0x7C00) == 0x7C00 && (c & 0x3FF);
        // A NaN comes back quiet with sign and payload; everything else exactly.
        const std::uint16_t bf16_back = f32_to_bf16(bf16_to_f32(c));
        const std::uint16_t f16_back = f32_to_f16(f16_to_f32(c));
        if (bf16_back != (bf16_nan ? (c | 0x0040) : c) && bad++ < 5)
            BOOST_ERROR("bf16 " << hex(c) << " -> " << hex(bf16_back));
        if (f16_back != (f16_nan ? (c | 0x0200) : c) && bad++ < 5)
            BOOST_ERROR("f16 " << hex(c) << " -> " << hex(f16_back));
    }
    BOOST_TEST(bad == 0u);
}

BOOST_AUTO_TEST_CASE(narrowing_reference_known_answers) {
    struct Case { std::uint32_t in; std::uint16_t bf16; std::uint16_t f16; };
    const Case cases[] = {
        {0x00000000, 0x0000, 0x0000}, {0x80000000, 0x8000, 0x8000},
        {0x3F800000, 0x3F80, 0x3C00},                    // 1.0
        {0x3F808000, 0x3F80, 0x3C04},                    // BF16 tie, even below: stays
        {0x3F818000, 0x3F82, 0x3C0C},                    // BF16 tie, odd below: up
        {0x3F807FFF, 0x3F80, 0x3C04}, {0x3F808001, 0x3F81, 0x3C04},
        {0x3F801000, 0x3F80, 0x3C00},                    // F16 tie, even below: stays
        {0x3F803000, 0x3F80, 0x3C02},                    // F16 tie, odd below: up
        {0x3F801001, 0x3F80, 0x3C01},
        {0x00000001, 0x0000, 0x0000},                    // F32 subnormals round like any value
        {0x00008000, 0x0000, 0x0000}, {0x00018000, 0x0002, 0x0000}, {0x0000FFFF, 0x0001, 0x0000},
        {0x007FFFFF, 0x0080, 0x0000}, {0x00800000, 0x0080, 0x0000},
        {0x7F7F7FFF, 0x7F7F, 0x7C00}, {0x7F7F8000, 0x7F80, 0x7C00}, {0x7F7FFFFF, 0x7F80, 0x7C00},
        {0x477FE000, 0x4780, 0x7BFF},                    // 65504, the largest F16
        {0x477FEFFF, 0x4780, 0x7BFF}, {0x477FF000, 0x4780, 0x7C00}, {0xC77FF000, 0xC780, 0xFC00},
        {0x38800000, 0x3880, 0x0400},                    // 2^-14, the smallest normal F16
        {0x387FFFFF, 0x3880, 0x0400}, {0x387FC000, 0x3880, 0x03FF}, {0x387FE000, 0x3880, 0x0400},
        {0x33800000, 0x3380, 0x0001},                    // 2^-24, the smallest F16 subnormal
        {0x33000000, 0x3300, 0x0000}, {0x33000001, 0x3300, 0x0001}, {0xB3000001, 0xB300, 0x8001},
        {0x33C00000, 0x33C0, 0x0002}, {0x34200000, 0x3420, 0x0002},  // 1.5 and 2.5 units: to even
        {0x7F800000, 0x7F80, 0x7C00}, {0xFF800000, 0xFF80, 0xFC00},
        {0x7FC00000, 0x7FC0, 0x7E00}, {0xFFC00000, 0xFFC0, 0xFE00},
        {0x7F800001, 0x7FC0, 0x7E00}, {0xFF800001, 0xFFC0, 0xFE00},  // sNaN -> quiet, sign kept
        {0x7FA00000, 0x7FE0, 0x7F00}, {0x7F812345, 0x7FC1, 0x7E09}, {0x7FBFFFFF, 0x7FFF, 0x7FFF},
    };
    for (const auto& c : cases) {
        BOOST_TEST(f32_to_bf16(float_of(c.in)) == c.bf16, "bf16 of " << hex(c.in));
        BOOST_TEST(f32_to_f16(float_of(c.in)) == c.f16, "f16 of " << hex(c.in));
    }
}

BOOST_AUTO_TEST_CASE(narrowing_reference_matches_rounding_formula) {
    auto values = edge_f32_bits();
    const auto random = random_f32_bits();
    values.insert(values.end(), random.begin(), random.end());
    std::size_t bf16_bad = 0, f16_bad = 0, nan_bad = 0;
    for (std::uint32_t u : values) {
        const float x = float_of(u);
        const std::uint16_t b = f32_to_bf16(x), h = f32_to_f16(x);
        if (std::isnan(x)) {
            // Quiet NaN with the sign kept, never Inf.
            const bool ok = (b & 0x7FC0) == 0x7FC0 && (b & 0x8000) == ((u >> 16) & 0x8000) &&
                            (h & 0x7E00) == 0x7E00 && (h & 0x8000) == ((u >> 16) & 0x8000);
            if (!ok && nan_bad++ < 5) BOOST_ERROR("NaN " << hex(u) << " -> " << hex(b) << " / " << hex(h));
            continue;
        }
        // BF16: 7 fraction bits, subnormal below 2^-126, overflow at 2^128 - 2^119 (ties up).
        const double bf16_want = narrowed_value(x, 7, -126, std::ldexp(1.0, 128));
        const double bf16_got = static_cast<double>(bf16_to_f32(b));
        if ((bf16_got != bf16_want || std::signbit(bf16_got) != std::signbit(bf16_want)) && bf16_bad++ < 5)
            BOOST_ERROR("bf16 of " << hex(u) << " = " << hex(b) << " want " << bf16_want);
        // F16: 10 fraction bits, subnormal below 2^-14, overflow at 65520 (ties up to 2^16).
        const double f16_want = narrowed_value(x, 10, -14, 65536.0);
        const double f16_got = static_cast<double>(f16_to_f32(h));
        if ((f16_got != f16_want || std::signbit(f16_got) != std::signbit(f16_want)) && f16_bad++ < 5)
            BOOST_ERROR("f16 of " << hex(u) << " = " << hex(h) << " want " << f16_want);
    }
    BOOST_TEST(bf16_bad == 0u);
    BOOST_TEST(f16_bad == 0u);
    BOOST_TEST(nan_bad == 0u);
#ifdef __FLT16_MAX__
    std::size_t native_bad = 0;
    for (std::uint32_t u : values) {
        const float x = float_of(u);
        if (std::isnan(x)) continue;
        const _Float16 native = static_cast<_Float16>(x);
        std::uint16_t nb;
        std::memcpy(&nb, &native, 2);
        if (nb != f32_to_f16(x) && native_bad++ < 5) BOOST_ERROR("f16 of " << hex(u) << " differs from _Float16");
    }
    BOOST_TEST(native_bad == 0u);
#endif
}

BOOST_AUTO_TEST_CASE(fp8_reference_matches_formulas_for_all_codes) {
    for (unsigned code = 0; code < 256; ++code) {
        const auto c = static_cast<std::uint8_t>(code);
        const unsigned sign = code >> 7;
        const std::string tag = hex(code);
        // E4M3 (FN): bias 7, no Inf, S.1111.111 is NaN.
        if ((code & 0x7F) == 0x7F)
            BOOST_TEST(bits_of(f8_e4m3_to_f32(c)) == (sign ? 0xFFC00000u : 0x7FC00000u), "e4m3 " << tag);
        else
            expect_value(f8_e4m3_to_f32(c), formula_value(sign, (code >> 3) & 0xF, code & 7, 3, 7), "e4m3 " + tag);
        // E5M2: bias 15 with Inf and NaN like F16.
        const unsigned e5 = (code >> 2) & 0x1F, m2 = code & 3;
        if (e5 == 31 && m2 != 0)
            BOOST_TEST(bits_of(f8_e5m2_to_f32(c)) == ((sign << 31) | 0x7FC00000u | (m2 << 21)), "e5m2 " << tag);
        else if (e5 == 31)
            BOOST_TEST(bits_of(f8_e5m2_to_f32(c)) == (sign ? 0xFF800000u : 0x7F800000u), "e5m2 " << tag);
        else
            expect_value(f8_e5m2_to_f32(c), formula_value(sign, e5, m2, 2, 15), "e5m2 " + tag);
        // E8M0: 2^(e-127), 0xFF is NaN.
        if (code == 0xFF)
            BOOST_TEST(bits_of(f8_e8m0_to_f32(c)) == 0x7FC00000u);
        else
            expect_value(f8_e8m0_to_f32(c), std::ldexp(1.0, static_cast<int>(code) - 127), "e8m0 " + tag);
        // FNUZ: no Inf, no -0, 0x80 is the only NaN (positive quiet).
        if (code == 0x80) {
            BOOST_TEST(bits_of(f8_e4m3fnuz_to_f32(c)) == 0x7FC00000u);
            BOOST_TEST(bits_of(f8_e5m2fnuz_to_f32(c)) == 0x7FC00000u);
        } else {
            expect_value(f8_e4m3fnuz_to_f32(c), formula_value(sign, (code >> 3) & 0xF, code & 7, 3, 8),
                         "e4m3fnuz " + tag);
            expect_value(f8_e5m2fnuz_to_f32(c), formula_value(sign, e5, m2, 2, 16), "e5m2fnuz " + tag);
        }
    }
}

BOOST_AUTO_TEST_CASE(e4m3_spot_values_from_the_spec) {
    BOOST_TEST(f8_e4m3_to_f32(0x7E) == 448.0f);
    BOOST_TEST(f8_e4m3_to_f32(0x38) == 1.0f);
    BOOST_TEST(f8_e4m3_to_f32(0x40) == 2.0f);
    BOOST_TEST(f8_e4m3_to_f32(0x77) == 240.0f);
    BOOST_TEST(f8_e4m3_to_f32(0xFE) == -448.0f);
    BOOST_TEST(f8_e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));
    BOOST_TEST(f8_e4m3_to_f32(0x08) == std::ldexp(1.0f, -6));
    BOOST_TEST(bits_of(f8_e4m3_to_f32(0x80)) == 0x80000000u);  // -0
    BOOST_TEST(bits_of(f8_e4m3_to_f32(0x7F)) == 0x7FC00000u);
    BOOST_TEST(bits_of(f8_e4m3_to_f32(0xFF)) == 0xFFC00000u);
    BOOST_TEST(f8_e5m2_to_f32(0x7B) == 57344.0f);
    BOOST_TEST(bits_of(f8_e5m2_to_f32(0x7C)) == 0x7F800000u);
    BOOST_TEST(bits_of(f8_e8m0_to_f32(0x00)) == 0x00400000u);
    BOOST_TEST(f8_e8m0_to_f32(0x7F) == 1.0f);
    BOOST_TEST(f8_e4m3fnuz_to_f32(0x7F) == 240.0f);
    BOOST_TEST(f8_e4m3fnuz_to_f32(0x40) == 1.0f);
    BOOST_TEST(f8_e5m2fnuz_to_f32(0x7F) == 57344.0f);
    BOOST_TEST(f8_e5m2fnuz_to_f32(0x40) == 1.0f);
    BOOST_TEST(bits_of(f8_e4m3fnuz_to_f32(0x00)) == 0u);
}

BOOST_AUTO_TEST_CASE(third_party_fixture_values) {
    // Bytes and values from safetensors_jl_testdata/SOURCE.md (written by torch).
    const auto file = test::read_bytes(test::fixtures_dir() / "safetensors_jl_testdata" / "non_sharded" /
                                       "model.safetensors");
    const auto contains = [&](std::vector<std::uint8_t> needle) {
        return std::search(file.begin(), file.end(), needle.begin(), needle.end()) != file.end();
    };
    BOOST_TEST(contains({0xae, 0xa9, 0xb8}));
    BOOST_TEST(contains({0xba, 0xb2, 0xba}));
    BOOST_TEST(contains({0x53, 0xbf, 0xbf, 0xbe, 0x58, 0x3f}));

    for_each_isa([](Isa) {
        const std::vector<std::byte> e4m3{std::byte{0xae}, std::byte{0xa9}, std::byte{0xb8}};
        const std::vector<std::byte> e5m2{std::byte{0xba}, std::byte{0xb2}, std::byte{0xba}};
        const std::vector<std::byte> bf16{std::byte{0x53}, std::byte{0xbf}, std::byte{0xbf},
                                          std::byte{0xbe}, std::byte{0x58}, std::byte{0x3f}};
        std::vector<float> out(3);
        decode_to_f32(view_of(DType::F8_E4M3, {3}, e4m3), out);
        BOOST_TEST(out == (std::vector<float>{-0.4375f, -0.28125f, -1.0f}), boost::test_tools::per_element());
        decode_to_f32(view_of(DType::F8_E5M2, {3}, e5m2), out);
        BOOST_TEST(out == (std::vector<float>{-0.75f, -0.1875f, -0.75f}), boost::test_tools::per_element());
        decode_to_f32(view_of(DType::BF16, {3}, bf16), out);
        BOOST_TEST(out == (std::vector<float>{-0.82421875f, -0.373046875f, 0.84375f}),
                   boost::test_tools::per_element());
    });
}

// ---- every vector path against the scalar reference ----

BOOST_AUTO_TEST_CASE(bulk_widening_matches_reference_for_all_codes_on_every_isa) {
    for_each_isa([](Isa) {
        check_widening<std::uint16_t>(convert_bf16_to_f32, bf16_to_f32, "bf16->f32");
        check_widening<std::uint16_t>(convert_f16_to_f32, f16_to_f32, "f16->f32");
        check_widening<std::uint8_t>(convert_f8_e4m3_to_f32, f8_e4m3_to_f32, "e4m3->f32");
        check_widening<std::uint8_t>(convert_f8_e5m2_to_f32, f8_e5m2_to_f32, "e5m2->f32");
        check_widening<std::uint8_t>(convert_f8_e8m0_to_f32, f8_e8m0_to_f32, "e8m0->f32");
    });
}

BOOST_AUTO_TEST_CASE(bulk_narrowing_matches_reference_on_every_isa) {
    const auto edges = edge_f32_bits();
    const auto random = random_f32_bits();
    for_each_isa([&](Isa) {
        check_narrowing(convert_f32_to_bf16, f32_to_bf16, edges, "f32->bf16 edges");
        check_narrowing(convert_f32_to_f16, f32_to_f16, edges, "f32->f16 edges");
        check_narrowing(convert_f32_to_bf16, f32_to_bf16, random, "f32->bf16 random");
        check_narrowing(convert_f32_to_f16, f32_to_f16, random, "f32->f16 random");
    });
}

BOOST_AUTO_TEST_CASE(bulk_paths_ignore_denormals_are_zero_and_flush_to_zero) {
    // The project never sets DAZ/FTZ, but a host program might: no conversion may change.
    struct MxcsrRestorer {
        unsigned saved = _mm_getcsr();
        ~MxcsrRestorer() { _mm_setcsr(saved); }
    } restore;
    _mm_setcsr(restore.saved | 0x8040u);  // FTZ | DAZ
    for_each_isa([](Isa) { check_all_bulk_paths_against_scalar(); });
}

// ---- whole views ----

BOOST_AUTO_TEST_CASE(decode_views_of_every_supported_dtype) {
    std::mt19937 rng(7);
    const std::size_t n = 1000;
    std::vector<std::byte> bytes(n * 8 + 1);
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    // F64: a few special values among the random ones (random doubles are mostly huge / tiny).
    const double specials[] = {1.0 / 3.0, -0.0, 65504.0, 1e300, -1e-300, 3.4028235677973366e38,
                               std::ldexp(1.0, -149), std::ldexp(1.0, -150) * 1.0000001, NAN, -INFINITY};
    for (std::size_t i = 0; i < std::size(specials); ++i) std::memcpy(bytes.data() + 1 + i * 8, &specials[i], 8);

    const DType dtypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::F8_E4M3,
                            DType::F8_E5M2, DType::F8_E8M0, DType::F8_E4M3FNUZ, DType::F8_E5M2FNUZ};
    for_each_isa([&](Isa) {
        for (DType dtype : dtypes) {
            BOOST_TEST_CONTEXT(dtype_name(dtype)) {
                const std::size_t size = dtype_bits(dtype) / 8;
                const std::vector<std::byte> payload(bytes.begin() + 1, bytes.begin() + 1 + static_cast<std::ptrdiff_t>(n * size));
                std::vector<std::byte> shifted(1);  // one byte in front: the view is unaligned
                shifted.insert(shifted.end(), payload.begin(), payload.end());
                const TensorView view = view_of(dtype, {10, static_cast<std::int64_t>(n / 10)}, shifted, 1);

                std::vector<std::uint32_t> want(n);
                for (std::size_t i = 0; i < n; ++i) {
                    const std::byte* p = payload.data() + i * size;
                    std::uint16_t u16 = 0;
                    std::memcpy(&u16, p, size == 2 ? 2 : 0);
                    const auto u8 = static_cast<std::uint8_t>(*p);
                    float f = 0;
                    switch (dtype) {
                        case DType::F32: std::memcpy(&f, p, 4); break;
                        case DType::F64: { double d; std::memcpy(&d, p, 8); f = static_cast<float>(d); break; }
                        case DType::F16: f = f16_to_f32(u16); break;
                        case DType::BF16: f = bf16_to_f32(u16); break;
                        case DType::F8_E4M3: f = f8_e4m3_to_f32(u8); break;
                        case DType::F8_E5M2: f = f8_e5m2_to_f32(u8); break;
                        case DType::F8_E8M0: f = f8_e8m0_to_f32(u8); break;
                        case DType::F8_E4M3FNUZ: f = f8_e4m3fnuz_to_f32(u8); break;
                        default: f = f8_e5m2fnuz_to_f32(u8); break;
                    }
                    want[i] = bits_of(f);
                }
                std::vector<float> out(n);
                decode_to_f32(view, out);
                std::vector<std::uint32_t> got(n);
                std::memcpy(got.data(), out.data(), n * 4);
                std::vector<std::uint64_t> inputs(n);
                expect_same(got, want, inputs, "decode_to_f32");

                std::vector<std::uint16_t> bf16(n), bf16_want(n);
                decode_to_bf16(view, bf16);
                for (std::size_t i = 0; i < n; ++i) {
                    if (dtype == DType::BF16) std::memcpy(&bf16_want[i], payload.data() + i * 2, 2);
                    else bf16_want[i] = f32_to_bf16(float_of(want[i]));
                }
                expect_same(bf16, bf16_want, inputs, "decode_to_bf16");
            }
        }
    });
}

BOOST_AUTO_TEST_CASE(decode_of_f64_rounds_to_nearest_and_keeps_nan_sign) {
    const double in[] = {1.0 + std::ldexp(1.0, -24), 1.0 + 3 * std::ldexp(1.0, -24), 1e39, -NAN};
    std::vector<std::byte> bytes(sizeof in);
    std::memcpy(bytes.data(), in, sizeof in);
    std::vector<float> out(4);
    decode_to_f32(view_of(DType::F64, {4}, bytes), out);
    BOOST_TEST(out[0] == 1.0f);                           // tie to even: down
    BOOST_TEST(out[1] == 1.0f + std::ldexp(1.0f, -22));   // tie to even: up
    BOOST_TEST(bits_of(out[2]) == 0x7F800000u);
    BOOST_TEST(std::isnan(out[3]));
    BOOST_TEST(std::signbit(out[3]));
}

BOOST_AUTO_TEST_CASE(decode_rejects_other_dtypes_and_wrong_sizes) {
    std::vector<std::byte> bytes(64);
    std::vector<float> f32(4);
    std::vector<std::uint16_t> bf16(4);
    for (DType dtype : {DType::I32, DType::U8, DType::BOOL, DType::C64, DType::F4, DType::I64}) {
        const auto size = dtype_byte_size(dtype, 4).value();
        const TensorView view = view_of(dtype, {4}, std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size)));
        BOOST_CHECK_EXCEPTION(decode_to_f32(view, f32), Error,
                              [](const Error& e) { return e.kind() == ErrorKind::input; });
        BOOST_CHECK_EXCEPTION(decode_to_bf16(view, bf16), Error,
                              [](const Error& e) { return e.kind() == ErrorKind::input; });
    }
    const std::vector<std::byte> eight(bytes.begin(), bytes.begin() + 8);
    std::vector<float> three(3);
    BOOST_CHECK_EXCEPTION(decode_to_f32(view_of(DType::BF16, {4}, eight), three), Error, [](const Error& e) {
        return e.kind() == ErrorKind::input && std::string(e.what()).find("3") != std::string::npos;
    });
    std::vector<std::uint16_t> five(5);
    BOOST_CHECK_THROW(decode_to_bf16(view_of(DType::F16, {4}, eight), five), Error);
    // A view whose byte count does not match its shape is refused, not over-read.
    BOOST_CHECK_THROW(decode_to_f32(view_of(DType::F32, {4}, eight), f32), Error);
    // Empty views are fine.
    std::vector<float> none;
    decode_to_f32(view_of(DType::F16, {0, 3}, {}), none);
}

// The synth encoder: every finite E4M3 value round-trips, ties go to even, out of range
// saturates, NaN keeps its sign.
BOOST_AUTO_TEST_CASE(f32_to_e4m3_round_trips_and_rounds_to_nearest_even) {
    for (int code = 0; code < 256; ++code) {
        if ((code & 0x7F) == 0x7F) continue;  // NaN codes
        const auto c = static_cast<std::uint8_t>(code);
        BOOST_TEST(static_cast<int>(f32_to_f8_e4m3(f8_e4m3_to_f32(c))) == code, "code " << code);
    }
    // Halfway between neighbours: ties to the even code, otherwise to the nearer one.
    for (int code = 0; code < 0x7E; ++code) {
        const float lo = f8_e4m3_to_f32(static_cast<std::uint8_t>(code));
        const float hi = f8_e4m3_to_f32(static_cast<std::uint8_t>(code + 1));
        const float mid = (lo + hi) / 2;  // exact: neighbours differ by one unit of a 3-bit mantissa
        const int even = code % 2 == 0 ? code : code + 1;
        BOOST_TEST(static_cast<int>(f32_to_f8_e4m3(mid)) == even, "between " << code << " and " << code + 1);
        BOOST_TEST(static_cast<int>(f32_to_f8_e4m3(std::nextafter(mid, 0.0f))) == code);
        BOOST_TEST(static_cast<int>(f32_to_f8_e4m3(std::nextafter(mid, 1000.0f))) == code + 1);
        BOOST_TEST(static_cast<int>(f32_to_f8_e4m3(-mid)) == (even | 0x80));
    }
    BOOST_TEST(f32_to_f8_e4m3(448.0f) == 0x7E);
    BOOST_TEST(f32_to_f8_e4m3(1e9f) == 0x7E);
    BOOST_TEST(f32_to_f8_e4m3(-std::numeric_limits<float>::infinity()) == 0xFE);
    BOOST_TEST(f32_to_f8_e4m3(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
    BOOST_TEST(f32_to_f8_e4m3(-std::numeric_limits<float>::quiet_NaN()) == 0xFF);
    BOOST_TEST(f32_to_f8_e4m3(1e-30f) == 0x00);  // far below half the smallest subnormal
    BOOST_TEST(f32_to_f8_e4m3(std::ldexp(1.0f, -10)) == 0x00);  // exactly half of 2^-9: tie to even 0
    BOOST_TEST(f32_to_f8_e4m3(std::ldexp(1.5f, -10)) == 0x01);
}

BOOST_AUTO_TEST_SUITE_END()
