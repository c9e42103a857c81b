#include <moequant/checked_math.hpp>

#include <boost/test/unit_test.hpp>

#include <limits>

using namespace moequant;

BOOST_AUTO_TEST_SUITE(checked_math)

namespace {

constexpr std::int64_t i64_max = std::numeric_limits<std::int64_t>::max();
constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

// The error a call throws (fails the test when it throws none).
template <typename F>
Error error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    BOOST_ERROR("no error thrown");
    return Error(ErrorKind::internal, "no error thrown");
}

}  // namespace

BOOST_AUTO_TEST_CASE(results_that_fit_are_exact) {
    BOOST_TEST(checked_mul(std::int64_t{3}, std::int64_t{-7}, "x") == -21);
    BOOST_TEST(checked_mul(std::int64_t{1} << 31, std::int64_t{1} << 31, "x") == std::int64_t{1} << 62);
    BOOST_TEST(checked_add(i64_max - 1, std::int64_t{1}, "x") == i64_max);
    BOOST_TEST(checked_mul(std::uint64_t{1} << 32, (std::uint64_t{1} << 32) - 1, "x") == u64_max - ((std::uint64_t{1} << 32) - 1));
    BOOST_TEST(checked_add(u64_max - 5, std::uint64_t{5}, "x") == u64_max);
}

BOOST_AUTO_TEST_CASE(overflow_is_an_input_error_with_the_callers_context) {
    const Error e = error_of([] {
        checked_add(i64_max, std::int64_t{1}, "the sum of sample_lengths", {.file = "acts.safetensors", .tensor = "sample_lengths"});
    });
    BOOST_TEST((e.kind() == ErrorKind::input));
    BOOST_TEST(e.code() == "ValueOverflow");
    BOOST_TEST(e.context().file == "acts.safetensors");
    BOOST_TEST(e.context().tensor == "sample_lengths");
    BOOST_TEST(e.message() == "the sum of sample_lengths overflows 64 bits (9223372036854775807 + 1)");
}

BOOST_AUTO_TEST_CASE(every_overflow_direction_is_caught_and_a_given_code_kept) {
    BOOST_TEST(error_of([] { checked_mul(i64_max / 2 + 1, std::int64_t{2}, "2 x I", {.code = "InvalidConfig"}); }).code() ==
               "InvalidConfig");
    BOOST_TEST(error_of([] { checked_mul(std::numeric_limits<std::int64_t>::min(), std::int64_t{-1}, "x"); }).code() ==
               "ValueOverflow");
    BOOST_TEST(error_of([] { checked_add(std::numeric_limits<std::int64_t>::min(), std::int64_t{-1}, "x"); }).code() ==
               "ValueOverflow");
    BOOST_TEST(error_of([] { checked_mul(u64_max, std::uint64_t{2}, "x"); }).message().find("x 2") != std::string::npos);
    BOOST_TEST(error_of([] { checked_add(u64_max, std::uint64_t{1}, "x"); }).code() == "ValueOverflow");
}

BOOST_AUTO_TEST_SUITE_END()
