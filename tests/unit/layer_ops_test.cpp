// Decoder building blocks against torch outputs of the Hugging Face formulas
// (tests/data/layer_ops/make_reference.py, run once; CI reads layer_ops.safetensors).
#include "bf16_products_here.hpp"
#include "test_support.hpp"

#include <moequant/compute_dtype.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/layer_ops.hpp>
#include <moequant/safetensors_reader.hpp>

#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

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

// An expert as the checkpoint could hold it, in `dtype` (BF16, F16 or F32), [out, in], and its
// values widened to float32 as ExpertWeightsF32 took them.
struct ExpertMatrix {
    Tensor stored;
    std::vector<float> widened;
};
ExpertMatrix expert_matrix(DType dtype, std::int64_t out, std::int64_t in, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.1f);
    std::vector<float> values(static_cast<std::size_t>(out * in));
    for (float& v : values) v = normal(rng);
    ExpertMatrix m{Tensor(dtype, {out, in}), std::vector<float>(values.size())};
    if (dtype == DType::F32) std::memcpy(m.stored.data(), values.data(), values.size() * 4);
    if (dtype == DType::BF16) convert_f32_to_bf16(values.data(), m.stored.data(), values.size());
    if (dtype == DType::F16) convert_f32_to_f16(values.data(), m.stored.data(), values.size());
    decode_to_f32(m.stored.view(), m.widened);
    return m;
}

// swiglu_mlp on ExpertWeights equals it on the widened float32 vectors, byte for byte, under
// the compute dtype in force. The intermediate size is over 1024 and not a multiple of it, so
// FP32 products widen BF16 weights in more than one block.
void check_expert_weights_match_float32_vectors(DType dtype) {
    constexpr std::int64_t rows = 5, hidden = 96, inter = 1100;
    const ExpertMatrix gate = expert_matrix(dtype, inter, hidden, 1), up = expert_matrix(dtype, inter, hidden, 2),
                       down = expert_matrix(dtype, hidden, inter, 3);
    std::vector<float> x(static_cast<std::size_t>(rows * hidden));
    std::mt19937_64 rng(4);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : x) v = normal(rng);
    const std::vector<float> want = swiglu_mlp(x, rows, hidden, gate.widened, up.widened, down.widened, inter);
    ExpertWeights w;
    w.gate = Tensor::copy_of(gate.stored.view());
    w.up = Tensor::copy_of(up.stored.view());
    w.down = Tensor::copy_of(down.stored.view());
    w.intermediate = inter;
    const std::vector<float> got = swiglu_mlp(x, rows, hidden, w);
    BOOST_TEST_REQUIRE(got.size() == want.size());
    BOOST_TEST(std::memcmp(got.data(), want.data(), got.size() * 4) == 0, dtype_name(dtype));
}

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

// Long samples run in query blocks (each seeing only the keys up to its last query): against a
// float64 loop written here, over block boundaries and two samples.
BOOST_AUTO_TEST_CASE(causal_attention_over_query_blocks) {
    const std::vector<std::int64_t> long_lengths = {600, 300};
    const std::int64_t t = 900, hq = 2, hk = 1, d = 16, dv = 8;
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> q(t * hq * d), k(t * hk * d), v(t * hk * dv), out(t * hq * dv);
    for (auto* a : {&q, &k, &v})
        for (auto& x : *a) x = normal(rng);
    const float scale = 0.25f;
    causal_attention(q.data(), k.data(), v.data(), hq, hk, d, dv, long_lengths, scale, out.data());
    std::vector<float> want(out.size());
    std::int64_t begin = 0;
    for (std::int64_t n : long_lengths) {
        for (std::int64_t h = 0; h < hq; ++h)
            for (std::int64_t i = 0; i < n; ++i) {
                std::vector<double> w(static_cast<std::size_t>(i + 1));
                double peak = -1e300, sum = 0;
                for (std::int64_t j = 0; j <= i; ++j) {
                    double dot = 0;
                    for (std::int64_t c = 0; c < d; ++c) dot += double(q[((begin + i) * hq + h) * d + c]) * k[((begin + j) * hk) * d + c];
                    peak = std::max(peak, w[j] = dot * scale);
                }
                for (auto& x : w) sum += (x = std::exp(x - peak));
                for (std::int64_t c = 0; c < dv; ++c) {
                    double o = 0;
                    for (std::int64_t j = 0; j <= i; ++j) o += w[j] / sum * v[((begin + j) * hk) * dv + c];
                    want[((begin + i) * hq + h) * dv + c] = static_cast<float>(o);
                }
            }
        begin += n;
    }
    BOOST_TEST(max_relative_error(out, want) < 1e-5);
}

BOOST_AUTO_TEST_CASE(swiglu_matches) {
    std::vector<float> g = tensor("swiglu.gate");
    swiglu(g.data(), tensor("swiglu.up").data(), static_cast<std::int64_t>(g.size()));
    BOOST_TEST(max_relative_error(g, tensor("swiglu.out")) < 1e-6);
}

BOOST_AUTO_TEST_CASE(expert_tensors_give_the_bytes_of_float32_vectors_with_fp32_products) {
    for (DType dtype : {DType::BF16, DType::F16, DType::F32}) check_expert_weights_match_float32_vectors(dtype);
}

BOOST_AUTO_TEST_CASE(expert_tensors_give_the_bytes_of_float32_vectors_with_bf16_products,
                     *boost::unit_test::precondition(bf16_products_here)) {
    const ComputeDtypeScope products;
    for (DType dtype : {DType::BF16, DType::F16, DType::F32}) check_expert_weights_match_float32_vectors(dtype);
}

// linear_into writes every value of its output (which may be unwritten memory: here NaN) with
// linear()'s bytes, under both compute dtypes; 1100 output columns span two of FP32's blocks.
void check_linear_into_matches_linear() {
    const std::int64_t rows = 5, out = 1100, in = 24;
    const ExpertMatrix w = expert_matrix(DType::F32, out, in, 11);
    const ExpertMatrix x = expert_matrix(DType::F32, rows, in, 12);
    const std::vector<float> want = linear(x.widened, rows, w.widened, out, in);
    std::vector<float> got(want.size(), std::nanf(""));
    linear_into(x.widened.data(), rows, w.widened.data(), out, in, got.data());
    BOOST_TEST(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
}

BOOST_AUTO_TEST_CASE(linear_into_writes_the_bytes_of_linear) { check_linear_into_matches_linear(); }

BOOST_AUTO_TEST_CASE(linear_into_writes_the_bytes_of_linear_with_bf16_products,
                     *boost::unit_test::precondition(bf16_products_here)) {
    const ComputeDtypeScope products;
    check_linear_into_matches_linear();
}

// The silu activations take their exps in vector blocks of 512: the bytes of the one-value
// formulas, over three blocks and a tail, with gates large enough to overflow exp(-g).
BOOST_AUTO_TEST_CASE(silu_activations_give_the_bytes_of_the_scalar_formulas) {
    const std::size_t n = 3 * 512 + 77;
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    std::vector<float> gate(n), up(n);
    for (std::size_t i = 0; i < n; ++i) {
        gate[i] = i % 97 == 0 ? -100.0f - static_cast<float>(i % 13) : normal(rng);
        up[i] = normal(rng);
    }
    // The BF16 rounding's edges: NaN kept quiet, infinities, a finite value that rounds to inf,
    // a tie to even.
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const float edges[] = {nan, -nan, inf, -inf, std::numeric_limits<float>::max(), std::bit_cast<float>(0x3F808000u)};
    for (std::size_t k = 0; k < std::size(edges); ++k) {
        gate[100 + k] = edges[k];
        up[200 + k] = edges[k];
    }
    auto bf16 = [](float v) { return bf16_to_f32(f32_to_bf16(v)); };
    std::vector<float> plain = gate, rounded = gate;
    apply_gated_activation({}, plain.data(), up.data(), static_cast<std::int64_t>(n));
    apply_gated_activation_bf16({}, rounded.data(), up.data(), static_cast<std::int64_t>(n));
    for (std::size_t i = 0; i < n; ++i) {
        const float want = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
        const float g = bf16(gate[i]);
        const float want_bf16 = bf16(bf16(g / (1.0f + std::exp(-g))) * bf16(up[i]));
        BOOST_TEST(std::bit_cast<std::uint32_t>(plain[i]) == std::bit_cast<std::uint32_t>(want));
        BOOST_TEST(std::bit_cast<std::uint32_t>(rounded[i]) == std::bit_cast<std::uint32_t>(want_bf16));
    }
}

BOOST_AUTO_TEST_CASE(an_expert_matrix_of_another_shape_is_refused) {
    ExpertWeights w;
    w.gate = Tensor(DType::BF16, {8, 16});
    w.up = Tensor(DType::BF16, {16, 8});  // transposed: as many values, the wrong shape
    w.down = Tensor(DType::BF16, {16, 8});
    w.intermediate = 8;
    const std::vector<float> x(2 * 16, 1.0f);
    BOOST_CHECK_THROW(swiglu_mlp(x, 2, 16, w), Error);
}

BOOST_AUTO_TEST_SUITE_END()
