// printable_name() / printable_text(): what a checkpoint's names may hold never reaches the
// terminal as something it acts on, and readable names stay readable.

#include <moequant/error.hpp>
#include <moequant/printable.hpp>

#include <boost/test/unit_test.hpp>

using namespace moequant;

BOOST_AUTO_TEST_SUITE(printable)

BOOST_AUTO_TEST_CASE(plain_and_cjk_names_are_kept) {
    BOOST_TEST(printable_name("model.layers.0.mlp.experts.1.gate_proj.weight") ==
               "model.layers.0.mlp.experts.1.gate_proj.weight");
    BOOST_TEST(printable_name("模型.层.权重") == "模型.层.权重");
    BOOST_TEST(printable_name("caf\xc3\xa9 \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xf0\x9f\x98\x80");  // é and an emoji
}

BOOST_AUTO_TEST_CASE(c0_controls_and_del_become_hex_escapes) {
    BOOST_TEST(printable_name("w\x1b[2J") == "w\\x1b[2J");
    BOOST_TEST(printable_name("a\rPASSED\n") == "a\\x0dPASSED\\x0a");
    BOOST_TEST(printable_name(std::string("x\0y", 3)) == "x\\x00y");
    BOOST_TEST(printable_name("t\x7f") == "t\\x7f");
}

BOOST_AUTO_TEST_CASE(invalid_utf8_is_escaped_byte_by_byte) {
    BOOST_TEST(printable_name("a\xff" "b") == "a\\xffb");
    BOOST_TEST(printable_name("\xc0\xaf") == "\\xc0\\xaf");          // overlong '/'
    BOOST_TEST(printable_name("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a UTF-16 surrogate
    BOOST_TEST(printable_name("end\xe6\xa8") == "end\\xe6\\xa8");     // cut inside a sequence
}

BOOST_AUTO_TEST_CASE(c1_controls_and_bidi_overrides_become_code_points) {
    BOOST_TEST(printable_name("a\xc2\x9b" "2J") == "a\\u{009b}2J");  // the 8-bit CSI
    BOOST_TEST(printable_name("x\xe2\x80\xaey") == "x\\u{202e}y");   // RIGHT-TO-LEFT OVERRIDE
    BOOST_TEST(printable_name("x\xe2\x80\xa8y") == "x\\u{2028}y");   // LINE SEPARATOR
}

BOOST_AUTO_TEST_CASE(backslash_is_escaped_in_names_but_not_in_text) {
    BOOST_TEST(printable_name("a\\x1b") == "a\\\\x1b");  // a literal "\x1b" is not an ESC
    BOOST_TEST(printable_text("re:.*\\.w2\x1b") == "re:.*\\.w2\\x1b");
    const std::string name = printable_name("e\x1b\\");
    BOOST_TEST(printable_text(name) == name);
}

BOOST_AUTO_TEST_CASE(error_lines_escape_every_field_and_the_message) {
    Error e(ErrorKind::input, "stores '\x1b[2K' twice\n",
            {.file = "f\r.safetensors", .tensor = "t\nPASSED", .plugin = "p\x07", .code = "X", .hint = "see\x1b"});
    BOOST_TEST(std::string(e.what()) ==
               "plugin 'p\\x07': f\\x0d.safetensors: tensor 't\\x0aPASSED': stores '\\x1b[2K' twice\\x0a (X); hint: see\\x1b");
    BOOST_TEST(e.context().tensor == "t\nPASSED");  // the context keeps the raw name (JSON escapes it)
}

BOOST_AUTO_TEST_SUITE_END()
