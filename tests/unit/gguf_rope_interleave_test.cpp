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
    // 2 heads of 4 rows: output row i is source row order[i].
    BOOST_TEST(rope_interleave_order(8, 2) == (std::vector<std::int64_t>{0, 2, 1, 3, 4, 6, 5, 7}), boost::test_tools::per_element());
    // One head: the whole tensor; no heads: as it is.
    BOOST_TEST(rope_interleave_order(8, 1) == (std::vector<std::int64_t>{0, 4, 1, 5, 2, 6, 3, 7}), boost::test_tools::per_element());
    std::vector<std::int64_t> identity(8);
    std::iota(identity.begin(), identity.end(), 0);
    BOOST_TEST(rope_interleave_order(8, 0) == identity, boost::test_tools::per_element());
}

// The reader puts the rows back one at a time: rope_interleaved_row is the order's inverse.
BOOST_AUTO_TEST_CASE(each_source_row_is_found_where_the_interleave_put_it) {
    for (const auto& [rows, heads] : {std::pair<std::int64_t, std::int64_t>{8, 2}, {8, 1}, {24, 3}, {128, 4}}) {
        const std::vector<std::int64_t> order = rope_interleave_order(rows, heads);
        for (std::int64_t r = 0; r < rows; ++r)
            BOOST_TEST(order[static_cast<std::size_t>(rope_interleaved_row(r, rows, heads))] == r, rows << " rows, " << heads << " heads, row " << r);
    }
}

BOOST_AUTO_TEST_CASE(rows_that_do_not_split_into_even_heads_are_refused) {
    BOOST_CHECK_NO_THROW(check_rope_interleave("q", 8, 2));
    for (std::int64_t heads : {3, 8, 0})
        BOOST_CHECK_EXCEPTION(check_rope_interleave("model.layers.0.self_attn.q_proj.weight", 8, heads), Error, [](const Error& e) {
            return e.kind() == ErrorKind::input && e.context().tensor == "model.layers.0.self_attn.q_proj.weight" && e.code() == "BadHeadShape";
        });
}

BOOST_AUTO_TEST_SUITE_END()
