// The GGUF K-quant search lanes (plugins/ggml_quants/k_lanes_avx512.cpp), run over SIMDe, against
// the scalar searches they mirror (quant_search.hpp), bit for bit: levels, scales and minimums
// of every sub-block. CI's CPUs lack AVX-512; golden.ggml_quants_isa runs the real kernels where
// the CPU has them.
#include <boost/test/unit_test.hpp>

#include "quant_search.hpp"
#include "row_codecs.hpp"

#include <moequant/cpu_isa.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace moequant::ggml_quants::lanes_avx512_emulated {
void offset_levels_32(int count, int nmax, const float* x, const float* weights, bool flat_when_below, OffsetSearch search,
                      std::uint8_t* levels, float* scales, float* negated_mins);
void symmetric_levels_16(int count, int nmax, const float* x, const float* weights, std::int8_t* levels, float* scales);
void q8_0_blocks(std::int64_t blocks, const float* x, std::uint8_t* out, float* scales);
void offset_requantize_8x32(const float* x, const float* ds, const float* dm, int nmax, std::uint8_t* levels);
void symmetric_requantize_16x16(const float* x, const float* ds, int nmax, std::int8_t* levels);
}  // namespace moequant::ggml_quants::lanes_avx512_emulated


using namespace moequant::ggml_quants;
namespace emulated = moequant::ggml_quants::lanes_avx512_emulated;

namespace {

std::mt19937 k_rng(20261206);

// `count` sub-blocks of `size` values, each of a different kind: random at magnitudes from
// 1e-30 to 1e30, zero, constant, one-signed, a lone outlier, subnormal, non-finite.
std::vector<float> sub_blocks(int count, int size) {
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> x(static_cast<std::size_t>(count * size));
    const float scales[] = {1e-30f, 1e-5f, 1.f, 1e5f, 1e30f};
    for (int k = 0; k < count; ++k) {
        const float s = scales[k % 5];
        for (int i = 0; i < size; ++i) {
            float& v = x[static_cast<std::size_t>(k * size + i)];
            switch ((k / 5) % 9) {
            case 0: v = s * normal(k_rng); break;
            case 1: v = 0.f; break;
            case 2: v = -s; break;
            case 3: v = -s * std::abs(normal(k_rng)); break;
            case 4: v = i == 3 ? 1e30f : s * normal(k_rng); break;
            case 5: v = 1e-40f * normal(k_rng); break;
            case 6: v = i == 7 ? INFINITY : normal(k_rng); break;
            case 7: v = i == 2 ? NAN : normal(k_rng); break;
            default: v = s * static_cast<float>(i % 4); break;
            }
        }
    }
    return x;
}

// Weights: positive, some zero, and whole sub-blocks of zeros.
std::vector<float> weights_for(std::size_t n) {
    std::uniform_real_distribution<float> uniform(0.f, 1.f);
    std::vector<float> w(n);
    for (std::size_t i = 0; i < n; ++i) w[i] = i % 5 == 0 || (i / 32) % 7 == 3 ? 0.f : uniform(k_rng);
    return w;
}

bool same_bits(const void* a, const void* b, std::size_t n) { return std::memcmp(a, b, n) == 0; }

// The emulated symmetric search of `count` sub-blocks of 16 against the scalar one, with
// weights_for's weights and with none (x^2).
void check_symmetric_lanes(int count, const std::vector<float>& x, const std::string& what) {
    const std::vector<float> w = weights_for(x.size());
    for (bool weighted : {false, true}) {
        std::vector<std::int8_t> want_levels(x.size()), got_levels(x.size());
        std::vector<float> want_scales(count), got_scales(count);
        for (int k = 0; k < count; ++k)
            want_scales[k] = symmetric_levels(16, 32, x.data() + 16 * k, want_levels.data() + 16 * k,
                                              weighted ? w.data() + 16 * k : nullptr);
        emulated::symmetric_levels_16(count, 32, x.data(), weighted ? w.data() : nullptr, got_levels.data(),
                                      got_scales.data());
        BOOST_TEST(want_levels == got_levels, "levels, " << what << ", weighted " << weighted);
        BOOST_TEST(same_bits(want_scales.data(), got_scales.data(), 4 * count), "scales, " << what << ", weighted " << weighted);
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(k_lanes_avx512)

BOOST_AUTO_TEST_CASE(offset_lanes_match_the_scalar_search) {
    struct Case {
        int nmax;
        OffsetSearch search;
        bool imatrix;  // qkx3 with given weights; otherwise qkx2 with the plain Q4_K/Q5_K weights
    };
    const Case cases[] = {{15, {-1.f, 0.1f, 20, false}, false},
                          {31, {-0.5f, 0.1f, 15, false}, false},
                          {15, {-0.9f, 0.05f, 36, false}, true},
                          {31, {-0.9f, 0.05f, 36, false}, true},
                          {15, {-1.f, 0.1f, 0, false}, false}};  // no trial scales
    for (int count : {1, 8, 16, 45, 90}) {
        const std::vector<float> x = sub_blocks(count, 32);
        for (const Case& c : cases) {
            std::vector<float> w = c.imatrix ? weights_for(x.size()) : std::vector<float>(x.size());
            if (!c.imatrix)
                for (int k = 0; k < count; ++k) {
                    // k_rows.cpp's plain weights: sqrt(mean square) + |x|, the sum sequential.
                    const float* xs = x.data() + 32 * k;
                    float squares = 0;
                    for (int i = 0; i < 32; ++i) squares += xs[i] * xs[i];
                    const float av = std::sqrt(squares / 32);
                    for (int i = 0; i < 32; ++i) w[static_cast<std::size_t>(32 * k + i)] = av + std::fabs(xs[i]);
                }
            std::vector<std::uint8_t> want_levels(x.size()), got_levels(x.size()), scratch(32);
            std::vector<float> want_scales(count), got_scales(count), want_mins(count), got_mins(count);
            for (int k = 0; k < count; ++k) {
                auto search = c.imatrix ? offset_levels_qkx3 : offset_levels_qkx2;
                want_scales[k] = search(32, c.nmax, x.data() + 32 * k, w.data() + 32 * k, want_levels.data() + 32 * k,
                                        &want_mins[k], scratch.data(), c.search);
            }
            emulated::offset_levels_32(count, c.nmax, x.data(), c.imatrix ? w.data() : nullptr, c.imatrix, c.search,
                                       got_levels.data(), got_scales.data(), got_mins.data());
            BOOST_TEST(want_levels == got_levels, "levels, count " << count << ", nmax " << c.nmax << ", imatrix " << c.imatrix);
            BOOST_TEST(same_bits(want_scales.data(), got_scales.data(), 4 * count), "scales, count " << count);
            BOOST_TEST(same_bits(want_mins.data(), got_mins.data(), 4 * count), "mins, count " << count);
        }
    }
}

BOOST_AUTO_TEST_CASE(symmetric_lanes_match_the_scalar_search) {
    for (int count : {1, 16, 45, 96}) {
        const std::vector<float> x = sub_blocks(count, 16);
        check_symmetric_lanes(count, x, "count " + std::to_string(count));
    }
}

// Sub-blocks of 16 whose extremes of either sign are near each other in magnitude, so that
// the trial levels reach both ends (-nmax and nmax - 1) in some lanes and only one in others:
// the lanes' clamps are left out only where no lane of the group needs them. Each round mixes
// ratios of the opposite extreme, signs, magnitudes, zeros, equal values and weights.
BOOST_AUTO_TEST_CASE(symmetric_lanes_match_the_scalar_search_at_the_clamps) {
    std::uniform_real_distribution<float> uniform(0.f, 1.f);
    std::uniform_int_distribution<int> pick(0, 9);
    const float ratios[] = {1.f, 0.999f, 0.99f, 0.985f, 0.97f, 0.96f, 0.95f, 0.9f, 0.5f, 0.f};
    const float magnitudes[] = {1e-30f, 1e-7f, 0.02f, 1.f, 1e7f, 1e30f};
    for (int round = 0; round < 60; ++round) {
        const int count = 16 + 16 * (round % 5) + round % 3;  // whole and part-filled groups
        std::vector<float> x(static_cast<std::size_t>(16 * count));
        for (int k = 0; k < count; ++k) {
            float* xs = x.data() + 16 * k;
            const float m = magnitudes[pick(k_rng) % 6], sign = pick(k_rng) % 2 ? 1.f : -1.f;
            // A third of the rounds only far ratios (no lane needs the upper clamp in most
            // trials), a third only near ones, a third any.
            const int r = pick(k_rng);
            const float ratio = ratios[round % 3 == 0 ? 7 + r % 3 : round % 3 == 1 ? r % 5 : r];
            const int kind = pick(k_rng);
            for (int i = 0; i < 16; ++i) xs[i] = kind == 0 ? 0.f : kind == 1 ? m : 0.85f * m * (2 * uniform(k_rng) - 1);
            const int top = pick(k_rng) % 16, bottom = (top + 1 + pick(k_rng)) % 16;
            xs[top] = sign * m;
            xs[bottom] = -sign * m * ratio;
        }
        check_symmetric_lanes(count, x, "round " + std::to_string(round));
    }
}

// Q8_0: the scalar row (MOEQUANT_ISA=scalar's path) against the emulated blocks, with the fp16
// scales put as the row codec puts them. Besides sub_blocks' kinds, blocks whose values fall
// exactly on halves (roundf's ties, away from zero) and on the largest level.
BOOST_AUTO_TEST_CASE(q8_0_lanes_match_the_scalar_row) {
    const moequant::Isa before = moequant::active_isa();
    moequant::set_isa_limit(moequant::Isa::scalar);
    for (int count : {1, 7, 64, 90}) {
        std::vector<float> x = sub_blocks(count, 32);
        for (int i = 0; i < 32 && count > 1; ++i) x[static_cast<std::size_t>(i)] = i == 0 ? 127.f : static_cast<float>(i - 16) + 0.5f;
        for (int i = 0; i < 32 && count > 2; ++i) x[static_cast<std::size_t>(32 + i)] = i == 5 ? -127.f : -static_cast<float>(i) - 0.5f;
        const auto n = static_cast<std::int64_t>(x.size());
        std::vector<std::uint8_t> want(static_cast<std::size_t>(34 * count)), got(want.size(), 0xA5);
        std::vector<float> scales(static_cast<std::size_t>(count));
        quantize_row_q8_0(x.data(), want.data(), n, nullptr);
        emulated::q8_0_blocks(count, x.data(), got.data(), scales.data());
        for (int b = 0; b < count; ++b) {
            const std::uint16_t h = to_f16(scales[static_cast<std::size_t>(b)]);
            got[static_cast<std::size_t>(34 * b)] = static_cast<std::uint8_t>(h & 0xff);
            got[static_cast<std::size_t>(34 * b + 1)] = static_cast<std::uint8_t>(h >> 8);
        }
        std::size_t first = 0;
        while (first < want.size() && want[first] == got[first]) ++first;
        BOOST_TEST(want == got, "q8_0 blocks, count " << count << ", first difference at byte " << first);
    }
    moequant::set_isa_limit(before);
}

// Q4_K / Q5_K's requantizing (k_rows.cpp's scale_min_finish) against its scalar loop, with
// scales and minimums of every kind: zero (the sub-block keeps its levels), tiny, huge, NaN.
BOOST_AUTO_TEST_CASE(offset_requantize_lanes_match_the_scalar_loop) {
    std::uniform_real_distribution<float> uniform(0.f, 1.f);
    for (int nmax : {15, 31})
        for (int round = 0; round < 40; ++round) {
            const std::vector<float> x = sub_blocks(8, 32);
            float ds[8], dm[8];
            for (int j = 0; j < 8; ++j) {
                const float kinds[] = {0.f, 1e-3f * uniform(k_rng), 0.02f * uniform(k_rng), 1e30f, NAN, 1e-40f, -0.f, uniform(k_rng)};
                ds[j] = kinds[(j + round) % 8];
                dm[j] = kinds[(3 * j + round + 1) % 8];
            }
            std::vector<std::uint8_t> want(256, 0x5A), got(256, 0x5A);
            for (int j = 0; j < 8; ++j) {
                if (ds[j] == 0) continue;
                for (int i = 32 * j; i < 32 * j + 32; ++i)
                    want[static_cast<std::size_t>(i)] =
                        static_cast<std::uint8_t>(std::clamp(nearest_int((x[static_cast<std::size_t>(i)] + dm[j]) / ds[j]), 0, nmax));
            }
            emulated::offset_requantize_8x32(x.data(), ds, dm, nmax, got.data());
            BOOST_TEST(want == got, "requantize, nmax " << nmax << ", round " << round);
        }
}

// Q6_K's requantizing (k_rows.cpp's q6_finish) against its scalar loop, scales of every kind.
BOOST_AUTO_TEST_CASE(symmetric_requantize_lanes_match_the_scalar_loop) {
    std::uniform_real_distribution<float> uniform(0.f, 1.f);
    for (int round = 0; round < 40; ++round) {
        const std::vector<float> x = sub_blocks(16, 16);
        float ds[16];
        for (int j = 0; j < 16; ++j) {
            const float kinds[] = {0.f, 1e-3f * uniform(k_rng), -0.02f * uniform(k_rng), 1e30f, NAN, 1e-40f, -0.f, uniform(k_rng)};
            ds[j] = kinds[(j + round) % 8];
        }
        std::vector<std::int8_t> want(256, 0x5A), got(256, 0x5A);
        for (int j = 0; j < 16; ++j) {
            if (ds[j] == 0) continue;
            for (int i = 16 * j; i < 16 * j + 16; ++i)
                want[static_cast<std::size_t>(i)] =
                    static_cast<std::int8_t>(std::clamp(nearest_int(x[static_cast<std::size_t>(i)] / ds[j]), -32, 31) + 32);
        }
        emulated::symmetric_requantize_16x16(x.data(), ds, 32, got.data());
        BOOST_TEST(want == got, "requantize, round " << round);
    }
}

BOOST_AUTO_TEST_SUITE_END()
