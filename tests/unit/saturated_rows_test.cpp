// SaturatedRowLog: part rows become source rows, and the warning names the first rows in order
// and counts the rest, whatever order the parts arrived in.

#include <moequant/engine/saturated_rows.hpp>

#include <boost/test/unit_test.hpp>

using namespace moequant;

BOOST_AUTO_TEST_SUITE(saturated_rows)

BOOST_AUTO_TEST_CASE(part_rows_become_source_rows) {
    SaturatedRowLog log;
    log.add("up", Projection::up, 1, 2, 128, {5});      // gate and up parts are row slices
    log.add("down", Projection::down, 1, 2, 256, {7});  // down parts are column slices
    log.add("gate", Projection::gate, 0, 1, 256, {});
    BOOST_TEST(log.size() == 2u);
    const std::string w = log.warning();
    BOOST_TEST(w.find("(down row 7, up row 133)") != std::string::npos, w);
    BOOST_TEST(w.starts_with("2 row(s) have max |w| below about 3.3e-37"), w);
}

BOOST_AUTO_TEST_CASE(the_warning_names_the_first_rows_and_counts_the_rest) {
    SaturatedRowLog log;
    log.add("t", Projection::gate, 0, 1, 16, {9, 3, 1, 4, 0, 8, 2});
    const std::string w = log.warning(3);
    BOOST_TEST(w.find("(t row 0, t row 1, t row 2, and 4 more)") != std::string::npos, w);
    BOOST_TEST(SaturatedRowLog().warning().empty());
}

BOOST_AUTO_TEST_CASE(names_in_the_warning_are_escaped) {
    SaturatedRowLog log;
    log.add("w\x1b[2J", Projection::gate, 0, 1, 4, {1});
    BOOST_TEST(log.warning().find("w\\x1b[2J row 1") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
