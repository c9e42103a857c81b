// exp_values against std::exp, bit for bit, on every ISA tier this CPU has: the special cases
// (zeros, infinities, NaNs, subnormals, the thresholds where glibc's expf overflows or
// underflows), every tail length, in place, and a sweep over all float bit patterns.
#include "isa_limit_restorer.hpp"

#include <moequant/cpu_isa.hpp>
#include <moequant/vector_exp.hpp>

#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

using namespace moequant;

namespace {

void for_each_isa(void (*check)()) {
    const test::IsaLimitRestorer restore;
    for (Isa isa : available_isas()) {
        set_isa_limit(isa);
        BOOST_TEST_CONTEXT("isa " << isa_name(isa)) { check(); }
    }
}

// Counts the values whose exp_values bits differ from std::exp's (NaNs: both NaN), reporting
// the first few.
std::size_t mismatches(const std::vector<float>& x) {
    std::vector<float> got(x.size() + 1, 1234.5f);  // a guard element past the end
    exp_values(x.data(), got.data(), x.size());
    BOOST_TEST(got.back() == 1234.5f);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const float want = std::exp(x[i]);
        if (std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(want) || (std::isnan(want) && std::isnan(got[i])))
            continue;
        if (++bad <= 5) BOOST_ERROR("exp(" << std::hexfloat << x[i] << ") = " << got[i] << ", std::exp gives " << want);
    }
    return bad;
}

std::vector<float> special_values() {
    std::vector<float> v = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, std::bit_cast<float>(0x7f800001u),
                            std::bit_cast<float>(0x00000001u), std::bit_cast<float>(0x807fffffu), 1.0f, -1.0f,
                            1e-8f, -1e-8f, 88.0f, -88.0f, 0x1.62e42ep6f, 0x1.62e430p6f, -0x1.9fe368p6f, -0x1.9d1d9ep6f,
                            -103.0f, -104.0f, -150.0f, 100.0f, 1e30f, -1e30f};
    // Each threshold's neighbours on both sides.
    for (float t : {88.0f, -88.0f, 0x1.62e42ep6f, -0x1.9fe368p6f, -0x1.9d1d9ep6f})
        for (int step = 1; step <= 3; ++step) {
            v.push_back(std::bit_cast<float>(std::bit_cast<std::uint32_t>(t) + static_cast<std::uint32_t>(step)));
            v.push_back(std::bit_cast<float>(std::bit_cast<std::uint32_t>(t) - static_cast<std::uint32_t>(step)));
        }
    return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(vector_exp)

BOOST_AUTO_TEST_CASE(special_values_give_std_exp_bits) {
    for_each_isa([] { BOOST_TEST(mismatches(special_values()) == 0u); });
}

// Every length up to 40 covers each tier's tails; the values mix ordinary and special lanes.
BOOST_AUTO_TEST_CASE(every_tail_length_and_in_place) {
    for_each_isa([] {
        const std::vector<float> specials = special_values();
        for (std::size_t n = 0; n <= 40; ++n) {
            std::vector<float> x(n);
            for (std::size_t i = 0; i < n; ++i) x[i] = i % 5 == 4 ? specials[i % specials.size()] : -0.37f * static_cast<float>(i);
            BOOST_TEST(mismatches(x) == 0u);
            std::vector<float> in_place = x;
            exp_values(in_place.data(), in_place.data(), n);
            for (std::size_t i = 0; i < n; ++i) BOOST_TEST(std::bit_cast<std::uint32_t>(in_place[i]) == std::bit_cast<std::uint32_t>(std::exp(x[i])));
        }
    });
}

// One bit pattern in 1021 of all 2^32 (4.2 M values, both signs, every exponent); all 2^32 were
// compared once when the kernels were written (docs/speed.md).
BOOST_AUTO_TEST_CASE(a_sweep_over_all_bit_patterns) {
    for_each_isa([] {
        std::vector<float> x;
        x.reserve((std::uint64_t{1} << 32) / 1021 + 1);
        for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 1021)
            x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
        BOOST_TEST(mismatches(x) == 0u);
    });
}

BOOST_AUTO_TEST_SUITE_END()
