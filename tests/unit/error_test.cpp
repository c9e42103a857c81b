#include <moequant/error.hpp>

#include <boost/test/unit_test.hpp>

using namespace moequant;

BOOST_AUTO_TEST_SUITE(error)

BOOST_AUTO_TEST_CASE(message_is_one_line_with_context_and_code) {
    Error e(ErrorKind::input, "data_offsets overlap", {.file = "a.safetensors", .tensor = "w", .code = "InvalidOffset"});
    BOOST_TEST(std::string(e.what()) == "a.safetensors: tensor 'w': data_offsets overlap (InvalidOffset)");
    BOOST_TEST(e.code() == "InvalidOffset");
    BOOST_TEST(e.message() == "data_offsets overlap");
    BOOST_TEST(exit_code(e.kind()) == 3);
}

BOOST_AUTO_TEST_CASE(layer_plugin_and_hint_appear_in_order) {
    Error e(ErrorKind::plugin, "boom", {.file = "f", .layer = 7, .plugin = "amx", .hint = "rebuild"});
    BOOST_TEST(std::string(e.what()) == "plugin 'amx': f: layer 7: boom; hint: rebuild");
}

BOOST_AUTO_TEST_CASE(with_context_fills_only_missing_fields) {
    Error inner(ErrorKind::input, "bad", {.tensor = "t"});
    Error outer = inner.with_context({.file = "shard.safetensors", .tensor = "other"});
    BOOST_TEST(outer.context().file == "shard.safetensors");
    BOOST_TEST(outer.context().tensor == "t");
    BOOST_TEST((outer.kind() == ErrorKind::input));
}

BOOST_AUTO_TEST_CASE(exit_codes_are_the_documented_ones) {
    BOOST_TEST(exit_code(ErrorKind::internal) == 1);
    BOOST_TEST(exit_code(ErrorKind::usage) == 2);
    BOOST_TEST(exit_code(ErrorKind::input) == 3);
    BOOST_TEST(exit_code(ErrorKind::plugin) == 4);
    BOOST_TEST(exit_code(ErrorKind::io) == 5);
    BOOST_TEST(exit_code(ErrorKind::verification) == 6);
}

BOOST_AUTO_TEST_SUITE_END()
