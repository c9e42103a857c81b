#include <moequant/error.hpp>
#include <moequant/options.hpp>

#include <boost/test/unit_test.hpp>

using namespace moequant;

BOOST_AUTO_TEST_SUITE(options)

BOOST_AUTO_TEST_CASE(set_replaces_and_keeps_order) {
    Options o{{"b", "1"}, {"a", "2"}};
    o.set("b", "3");
    BOOST_TEST(o.items().size() == 2u);
    BOOST_TEST(o.items()[0].first == "b");
    BOOST_TEST(o.get("b").value() == "3");
    BOOST_TEST(!o.get("c").has_value());
}

BOOST_AUTO_TEST_CASE(typed_getters_parse_or_fall_back) {
    Options o{{"n", "-12"}, {"x", "0.25"}, {"on", "yes"}, {"off", "0"}};
    BOOST_TEST(o.get_int("n", 0) == -12);
    BOOST_TEST(o.get_int("missing", 7) == 7);
    BOOST_TEST(o.get_double("x", 0) == 0.25);
    BOOST_TEST(o.get_bool("on", false));
    BOOST_TEST(!o.get_bool("off", true));
    BOOST_TEST(o.get_string("missing", "d") == "d");
}

BOOST_AUTO_TEST_CASE(unparsable_values_are_usage_errors_naming_the_option) {
    Options o{{"threads", "four"}, {"flag", "maybe"}, {"n", "12x"}};
    try {
        o.get_int("threads", 1);
        BOOST_FAIL("expected an error");
    } catch (const Error& e) {
        BOOST_TEST((e.kind() == ErrorKind::usage));
        BOOST_TEST(std::string(e.what()).find("threads") != std::string::npos);
    }
    BOOST_CHECK_THROW(o.get_bool("flag", false), Error);
    BOOST_CHECK_THROW(o.get_int("n", 0), Error);
}

BOOST_AUTO_TEST_SUITE_END()
