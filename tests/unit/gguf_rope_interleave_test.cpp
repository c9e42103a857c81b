// llama's Q/K row permutation (formats/gguf/gguf_rope_interleave): each head's half-split rotary
// rows [x0..x(d/2-1), y0..y(d/2-1)] become the pairs [x0, y0, x1, y1, ...].
#include "gguf_rope_interleave.hpp"

#include <moequant/error.hpp>

#include <boost/test/unit_test.hpp>

#include <numeric>
#include <vector>

using namespace moequant;
using namespace moequant::formats;

BOOST_AUTO_TEST_SUITE(gguf_rope_interleave)

BOOST_AUTO_TEST_CASE(rows_of_each_head_are_interleaved) {
    // 2 heads of 4 rows, rows of 2 values: row r holds {10r, 10r+1}.
    std::vector<float> w;
    for (int r = 0; r < 8; ++r) w.insert(w.end(), {10.0f * r, 10.0f * r + 1});
    const auto out = rope_interleave_rows(w, {2, 8}, 2);
    const std::vector<int> rows = {0, 2, 1, 3, 4, 6, 5, 7};
    for (std::size_t i = 0; i < rows.size(); ++i) {
        BOOST_TEST(out[2 * i] == 10.0f * rows[i]);
        BOOST_TEST(out[2 * i + 1] == 10.0f * rows[i] + 1);
    }
    // A bias: one value per row.
    std::vector<float> bias(8);
    std::iota(bias.begin(), bias.end(), 0.0f);
    BOOST_TEST(rope_interleave_rows(bias, {8}, 2) == (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}), boost::test_tools::per_element());
    // One head: the whole tensor; no heads: as it is.
    BOOST_TEST(rope_interleave_rows(bias, {8}, 1) == (std::vector<float>{0, 4, 1, 5, 2, 6, 3, 7}), boost::test_tools::per_element());
    BOOST_TEST(rope_interleave_rows(bias, {8}, 0) == bias, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(rows_that_do_not_split_into_even_heads_are_refused) {
    BOOST_CHECK_NO_THROW(check_rope_interleave("q", 8, 2));
    for (std::int64_t heads : {3, 8, 0})
        BOOST_CHECK_EXCEPTION(check_rope_interleave("model.layers.0.self_attn.q_proj.weight", 8, heads), Error, [](const Error& e) {
            return e.kind() == ErrorKind::input && e.context().tensor == "model.layers.0.self_attn.q_proj.weight" && e.code() == "BadHeadShape";
        });
}

// gpt-oss's gate_up_proj_bias [experts, 2I]: [..., ::2] is the gate's, [..., 1::2] the up's.
BOOST_AUTO_TEST_CASE(interleaved_columns_split_per_row) {
    const std::vector<float> rows = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15};  // 2 rows of 6
    BOOST_TEST(take_interleaved_columns(rows, 6, 0, 2) == (std::vector<float>{0, 2, 4, 10, 12, 14}), boost::test_tools::per_element());
    BOOST_TEST(take_interleaved_columns(rows, 6, 1, 2) == (std::vector<float>{1, 3, 5, 11, 13, 15}), boost::test_tools::per_element());
    BOOST_TEST(take_interleaved_columns(rows, 6, 0, 1) == rows, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
