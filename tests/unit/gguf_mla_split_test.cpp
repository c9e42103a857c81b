// llama.cpp's MLA tensors from DeepSeek's kv_b_proj, against the converter's torch steps worked
// out by hand: kv_b.view(heads, nope + v, kv_lora); k_b = kv_b[:, :nope].transpose(1, 2);
// v_b = kv_b[:, nope:].
#include "gguf_mla_split.hpp"

#include <moequant/error.hpp>

#include <boost/test/unit_test.hpp>

using namespace moequant;
using namespace moequant::formats;

BOOST_AUTO_TEST_SUITE(gguf_mla_split)

BOOST_AUTO_TEST_CASE(k_b_is_the_transposed_nope_rows_and_v_b_the_rest) {
    const MlaShape s{.heads = 2, .nope = 3, .v = 2, .kv_lora = 4};
    std::vector<float> kv_b;  // value = 100 h + 10 row-in-head + column
    for (int h = 0; h < 2; ++h)
        for (int r = 0; r < 5; ++r)
            for (int c = 0; c < 4; ++c) kv_b.push_back(static_cast<float>(100 * h + 10 * r + c));
    const auto k_b = mla_kv_b_part(kv_b, s, MlaPart::k_b);
    const auto v_b = mla_kv_b_part(kv_b, s, MlaPart::v_b);
    BOOST_TEST((mla_part_dims(s, MlaPart::k_b) == std::vector<std::int64_t>{3, 4, 2}));
    BOOST_TEST((mla_part_dims(s, MlaPart::v_b) == std::vector<std::int64_t>{4, 2, 2}));
    BOOST_REQUIRE(k_b.size() == 24u);
    BOOST_REQUIRE(v_b.size() == 16u);
    // k_b[h][r][c] = kv_b[h][c][r]
    for (int h = 0; h < 2; ++h)
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 3; ++c) BOOST_TEST(k_b[static_cast<std::size_t>((h * 4 + r) * 3 + c)] == 100 * h + 10 * c + r);
    // v_b[h][r][c] = kv_b[h][3 + r][c]
    for (int h = 0; h < 2; ++h)
        for (int r = 0; r < 2; ++r)
            for (int c = 0; c < 4; ++c) BOOST_TEST(v_b[static_cast<std::size_t>((h * 2 + r) * 4 + c)] == 100 * h + 10 * (3 + r) + c);
}

BOOST_AUTO_TEST_CASE(a_kv_b_of_another_shape_is_refused_naming_it) {
    const MlaShape s{.heads = 2, .nope = 3, .v = 2, .kv_lora = 4};
    check_mla_kv_b("kv", 10, 4, s);
    BOOST_CHECK_EXCEPTION(check_mla_kv_b("model.layers.0.self_attn.kv_b_proj.weight", 12, 4, s), Error, [](const Error& e) {
        return std::string(e.what()).find("kv_b_proj") != std::string::npos && e.kind() == ErrorKind::input;
    });
}

BOOST_AUTO_TEST_SUITE_END()
