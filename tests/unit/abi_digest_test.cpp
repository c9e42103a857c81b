// The plugin ABI cannot drift unnoticed: a digest of the plugin-facing SDK headers, taken with
// comments and whitespace normalized away (so prose edits do not count), must equal the value
// recorded beside MOEQUANT_PLUGIN_ABI_VERSION in plugin_abi.hpp. Any change to a declaration — a
// virtual added, a member moved, a struct grown — changes the digest, and this test then asks
// for an ABI bump (and a changelog line) together with the new digest.

#include "test_support.hpp"

#include <moequant/digest.hpp>
#include <moequant/plugin.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <sstream>
#include <vector>

using namespace moequant;
using namespace moequant::test;

namespace {

// The source without comments (string and character literals kept as they are).
std::string without_comments(const std::string& text) {
    enum class State { code, line_comment, block_comment, string, character } state = State::code;
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i], next = i + 1 < text.size() ? text[i + 1] : '\0';
        switch (state) {
            case State::code:
                if (c == '/' && next == '/') state = State::line_comment, ++i;
                else if (c == '/' && next == '*') state = State::block_comment, ++i, out += ' ';
                else {
                    if (c == '"') state = State::string;
                    if (c == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(text[i - 1])))) state = State::character;
                    out += c;
                }
                break;
            case State::line_comment:
                if (c == '\n') state = State::code, out += c;
                break;
            case State::block_comment:
                if (c == '*' && next == '/') state = State::code, ++i;
                else if (c == '\n') out += c;
                break;
            case State::string:
            case State::character:
                out += c;
                if (c == '\\' && next != '\0') out += next, ++i;
                else if ((state == State::string && c == '"') || (state == State::character && c == '\'')) state = State::code;
                break;
        }
    }
    return out;
}

// One line per non-empty source line, runs of blanks made one space; the digest's own line is
// left out (it cannot contain itself).
std::string normalized(const std::string& text) {
    std::istringstream in(without_comments(text));
    std::string line, out;
    while (std::getline(in, line)) {
        std::string squeezed;
        for (char c : line) {
            const bool blank = c == ' ' || c == '\t' || c == '\r';
            if (blank && (squeezed.empty() || squeezed.back() == ' ')) continue;
            squeezed += blank ? ' ' : c;
        }
        while (!squeezed.empty() && squeezed.back() == ' ') squeezed.pop_back();
        if (squeezed.empty() || squeezed.starts_with("#define MOEQUANT_PLUGIN_ABI_DIGEST")) continue;
        out += squeezed + "\n";
    }
    return out;
}

// The plugin-facing headers: every public SDK header, and the version header's template.
std::vector<fs::path> sdk_headers() {
    std::vector<fs::path> headers;
    for (const auto& e : fs::directory_iterator(fs::path(MOEQUANT_SOURCE_DIR) / "core/sdk/include/moequant"))
        if (e.path().extension() == ".hpp" || e.path().filename() == "version.hpp.in") headers.push_back(e.path());
    std::sort(headers.begin(), headers.end());
    return headers;
}

std::string sdk_digest() {
    Digest64 d;
    for (const auto& h : sdk_headers()) {
        d.update(h.filename().string() + "\n");
        d.update(normalized(read_text(h)));
    }
    return d.hex();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(abi_digest)

BOOST_AUTO_TEST_CASE(normalization_ignores_prose_and_layout_only) {
    const std::string a = "struct S {  // why\n  int x; /* note */\n\n  virtual void f();\n};\n";
    const std::string b = "struct S {\n int x;\n virtual void f(); // reworded\n};";
    BOOST_TEST(normalized(a) == normalized(b));
    BOOST_TEST(normalized(a) != normalized("struct S {\n int x;\n virtual void f();\n virtual void g();\n};"));
    BOOST_TEST(normalized("const char* s = \"a // not a comment\";") == "const char* s = \"a // not a comment\";\n");
    BOOST_TEST(normalized("char c = '\\'';  // quote") == "char c = '\\'';\n");
}

BOOST_AUTO_TEST_CASE(plugin_facing_headers_match_the_recorded_digest) {
    BOOST_TEST_REQUIRE(sdk_headers().size() > 10u);
    const std::string now = sdk_digest();
    BOOST_TEST(now == std::string(MOEQUANT_PLUGIN_ABI_DIGEST),
               "the plugin-facing SDK headers changed (digest " << now << ", recorded " << MOEQUANT_PLUGIN_ABI_DIGEST
                   << " for ABI " << MOEQUANT_PLUGIN_ABI_VERSION
                   << "): bump the ABI and record the new digest (the SDK minor version in CMakeLists.txt, which is the "
                      "ABI; MOEQUANT_PLUGIN_ABI_DIGEST and a changelog line in core/sdk/include/moequant/plugin_abi.hpp; "
                      "the full entry in docs/plugins.md)");
}

BOOST_AUTO_TEST_SUITE_END()
