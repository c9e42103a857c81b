// The AMX tile layout's index formula against the worked examples of kt-cpu-format.md §4.4
// (checked there against kt-kernel).
#include "amx_layout.hpp"

#include <boost/test/unit_test.hpp>

using namespace moequant::amx;

namespace {

// Byte and nibble of element (r, c) through the tile/word decomposition.
std::pair<std::int64_t, int> locate(Method m, std::int64_t n, std::int64_t k, std::int64_t r, std::int64_t c) {
    const std::int64_t w = constants(m).tile_k;
    const std::int64_t tile = c / w, j = c % w;
    const std::int64_t jj = m == Method::int4 ? j % 64 : j;
    return {tile_word_offset(m, n, k, r, tile, jj / 4) + jj % 4, m == Method::int4 ? static_cast<int>(j / 64) : 0};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(amx_layout)

BOOST_AUTO_TEST_CASE(worked_examples_of_the_spec) {
    struct Example {
        Method m;
        std::int64_t n, k, r, c, byte;
        int nibble;
    };
    const Example examples[] = {
        {Method::int8, 128, 7168, 0, 4, 64, 0},        {Method::int8, 128, 7168, 1, 0, 4, 0},
        {Method::int8, 128, 7168, 16, 0, 1024, 0},     {Method::int8, 128, 7168, 0, 64, 2048, 0},
        {Method::int8, 128, 7168, 32, 0, 114688, 0},   {Method::int8, 128, 7168, 70, 3600, 688408, 0},
        {Method::int4, 256, 7168, 0, 64, 0, 1},        {Method::int4, 256, 7168, 0, 128, 2048, 0},
        {Method::int4, 256, 7168, 32, 0, 57344, 0},    {Method::int4, 256, 7168, 130, 3700, 688968, 1},
        {Method::int4, 256, 7168, 255, 7167, 917503, 1},
    };
    for (const auto& e : examples) {
        auto [byte, nibble] = locate(e.m, e.n, e.k, e.r, e.c);
        BOOST_TEST(byte == e.byte, "(" << e.r << "," << e.c << ")");
        BOOST_TEST(nibble == e.nibble, "(" << e.r << "," << e.c << ")");
    }
}

BOOST_AUTO_TEST_CASE(every_code_byte_is_addressed_exactly_once) {
    for (Method m : {Method::int8, Method::int4}) {
        const std::int64_t n = 160, k = 3712;  // a partial last N-block and K-block for both methods
        std::vector<int> hits(static_cast<std::size_t>(code_bytes(m, n, k)), 0);
        for (std::int64_t r = 0; r < n; ++r)
            for (std::int64_t c = 0; c < k; ++c) {
                auto [byte, nibble] = locate(m, n, k, r, c);
                hits[static_cast<std::size_t>(byte)] += 1 << (4 * nibble);
            }
        const int expected = m == Method::int8 ? 1 : 0x11;  // INT4: one low and one high nibble per byte
        for (int h : hits) BOOST_REQUIRE(h == expected);
    }
}

BOOST_AUTO_TEST_CASE(shape_rules) {
    BOOST_TEST(shape_problem(Method::int8, 32, 64).empty());
    BOOST_TEST(shape_problem(Method::int4, 96, 3712).empty());
    BOOST_TEST(!shape_problem(Method::int8, 48, 64).empty());
    BOOST_TEST(!shape_problem(Method::int4, 32, 192).empty());
    BOOST_TEST(shape_problem(Method::int4, 32, 192).find("k) % 128") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
