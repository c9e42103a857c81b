#include <moequant/dtype.hpp>

#include <boost/test/unit_test.hpp>

using namespace moequant;

BOOST_AUTO_TEST_SUITE(dtype)

// Every safetensors dtype of model-families.md §3.2 with its size in bits.
BOOST_AUTO_TEST_CASE(every_safetensors_dtype_is_known_with_its_bit_size) {
    const std::pair<const char*, unsigned> expected[] = {
        {"BOOL", 8},  {"F4", 4},       {"F6_E2M3", 6},     {"F6_E3M2", 6},     {"U8", 8},   {"I8", 8},
        {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8},   {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8},
        {"I16", 16},  {"U16", 16},     {"F16", 16},       {"BF16", 16},       {"I32", 32}, {"U32", 32},
        {"F32", 32},  {"C64", 64},     {"F64", 64},       {"I64", 64},        {"U64", 64}};
    BOOST_TEST(std::size(expected) == static_cast<std::size_t>(dtype_count));
    for (auto [name, bits] : expected) {
        auto d = dtype_from_name(name);
        BOOST_TEST_REQUIRE(d.has_value(), name);
        BOOST_TEST(dtype_bits(*d) == bits, name);
        BOOST_TEST(dtype_name(*d) == name);
    }
}

BOOST_AUTO_TEST_CASE(declaration_order_is_the_reference_enum_order) {
    // The reference writer sorts by descending enum order: U64 first, BOOL last.
    BOOST_TEST(static_cast<int>(DType::BOOL) == 0);
    BOOST_TEST(static_cast<int>(DType::U64) == dtype_count - 1);
    BOOST_TEST((DType::I64 > DType::F64));
    BOOST_TEST((DType::F32 > DType::BF16));
    BOOST_TEST((DType::F8_E8M0 > DType::F8_E4M3));
}

BOOST_AUTO_TEST_CASE(unknown_names_and_wrong_case_are_rejected) {
    BOOST_TEST(!dtype_from_name("f32").has_value());
    BOOST_TEST(!dtype_from_name("F128").has_value());
    BOOST_TEST(!dtype_from_name("").has_value());
    BOOST_TEST(!dtype_from_name("F8_E4M3FN").has_value());
}

BOOST_AUTO_TEST_CASE(byte_sizes_of_sub_byte_types_must_be_whole_bytes) {
    BOOST_TEST(dtype_byte_size(DType::F4, 2).value() == 1u);
    BOOST_TEST(!dtype_byte_size(DType::F4, 3).has_value());
    BOOST_TEST(dtype_byte_size(DType::F6_E2M3, 4).value() == 3u);
    BOOST_TEST(!dtype_byte_size(DType::F6_E3M2, 5).has_value());
    BOOST_TEST(dtype_byte_size(DType::BF16, 7).value() == 14u);
    BOOST_TEST(dtype_byte_size(DType::F32, 0).value() == 0u);
}

BOOST_AUTO_TEST_CASE(byte_size_overflow_is_detected) {
    BOOST_TEST(!dtype_byte_size(DType::F64, UINT64_MAX / 8).has_value());
    BOOST_TEST(dtype_byte_size(DType::U8, UINT64_MAX / 8).value() == UINT64_MAX / 8);
}

BOOST_AUTO_TEST_CASE(float_classification) {
    BOOST_TEST(dtype_is_float(DType::F8_E4M3));
    BOOST_TEST(dtype_is_float(DType::BF16));
    BOOST_TEST(!dtype_is_float(DType::I8));
    BOOST_TEST(!dtype_is_float(DType::BOOL));
}

BOOST_AUTO_TEST_SUITE_END()
