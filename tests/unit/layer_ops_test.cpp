// Decoder building blocks against torch outputs of the Hugging Face formulas
// (tests/data/layer_ops/make_reference.py, run once; CI reads layer_ops.safetensors).
#include "test_support.hpp"

#include <moequant/layer_ops.hpp>
#include <moequant/safetensors_reader.hpp>

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>

using namespace moequant;
using namespace moequant::test;

namespace {

const SafetensorsFile& reference() {
    static const SafetensorsFile f = SafetensorsFile::open(fs::path(MOEQUANT_SOURCE_DIR) / "tests/data/layer_ops/layer_ops.safetensors");
    return f;
}

std::vector<float> tensor(const std::string& name) {
    const TensorView v = reference().view(name);
    std::vector<float> values(v.size_bytes() / 4);
    std::memcpy(values.data(), v.data(), v.size_bytes());
    return values;
}


const std::vector<std::int64_t> lengths = {7, 5};

}  // namespace

BOOST_AUTO_TEST_SUITE(layer_ops)

BOOST_AUTO_TEST_CASE(rms_norm_plain_and_zero_centred) {
    const std::vector<float> x = tensor("norm.x");
    std::vector<float> y(x.size());
    rms_norm(x.data(), 7, 64, tensor("norm.w").data(), 1e-6f, false, y.data());
    BOOST_TEST(max_relative_error(y, tensor("norm.plain")) < 1e-6);
    rms_norm(x.data(), 7, 64, tensor("norm.w0").data(), 1e-6f, true, y.data());
    BOOST_TEST(max_relative_error(y, tensor("norm.zero_centred")) < 1e-6);
}

BOOST_AUTO_TEST_CASE(rotary_embeddings_full_partial_and_interleaved) {
    auto rotated = [&](std::int64_t rotary_dim, double base, RopeStyle style) {
        std::vector<float> x = tensor("rope.x");
        apply_rope(x.data(), 4, 32, rotary_dim, lengths, rope_inverse_frequencies(base, rotary_dim), style);
        return x;
    };
    BOOST_TEST(max_relative_error(rotated(32, 10000.0, RopeStyle::rotate_half), tensor("rope.half_full")) < 1e-5);
    BOOST_TEST(max_relative_error(rotated(16, 1e6, RopeStyle::rotate_half), tensor("rope.half_partial")) < 1e-5);
    BOOST_TEST(max_relative_error(rotated(32, 10000.0, RopeStyle::interleaved), tensor("rope.interleaved")) < 1e-5);
}

BOOST_AUTO_TEST_CASE(causal_grouped_query_attention_over_two_samples) {
    std::vector<float> out(12 * 4 * 24);
    causal_attention(tensor("attn.q").data(), tensor("attn.k").data(), tensor("attn.v").data(), 4, 2, 32, 24, lengths,
                     1.0f / std::sqrt(32.0f), out.data());
    BOOST_TEST(max_relative_error(out, tensor("attn.out")) < 1e-5);
    // The first token of each sample sees only itself: its output is its own value row.
    const std::vector<float> v = tensor("attn.v");
    for (std::int64_t d = 0; d < 24; ++d) BOOST_TEST(out[(7 * 4 + 3) * 24 + d] == v[(7 * 2 + 1) * 24 + d]);
}

BOOST_AUTO_TEST_CASE(swiglu_matches) {
    std::vector<float> g = tensor("swiglu.gate");
    swiglu(g.data(), tensor("swiglu.up").data(), static_cast<std::int64_t>(g.size()));
    BOOST_TEST(max_relative_error(g, tensor("swiglu.out")) < 1e-6);
}

BOOST_AUTO_TEST_SUITE_END()
