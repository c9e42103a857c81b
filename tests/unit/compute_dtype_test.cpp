// The BF16 products (compute_dtype.hpp): linear() and causal_attention() with compute dtype
// bf16 give the products of the BF16-rounded operands accumulated in FP32 — checked against
// the same products in double — and bytes that do not depend on the thread count.
#include "bf16_products_here.hpp"

#include <moequant/compute_dtype.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/layer_ops.hpp>
#include <moequant/parallel.hpp>

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>

using namespace moequant;

namespace {

struct ThreadsAt {
    const std::size_t before = max_threads();
    explicit ThreadsAt(std::size_t n) { set_max_threads(n); }
    ~ThreadsAt() { set_max_threads(before); }
};

std::vector<float> random_values(std::size_t n, unsigned seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

float bf16_round(float v) { return bf16_to_f32(f32_to_bf16(v)); }

}  // namespace

BOOST_AUTO_TEST_SUITE(compute_dtype)

BOOST_AUTO_TEST_CASE(names_and_the_default) {
    BOOST_TEST((moequant::compute_dtype() == ComputeDtype::f32));
    BOOST_TEST((compute_dtype_from_name("bf16") == ComputeDtype::bf16));
    BOOST_TEST((compute_dtype_from_name("bfloat16") == ComputeDtype::bf16));
    BOOST_TEST((compute_dtype_from_name("f32") == ComputeDtype::f32));
    BOOST_TEST(!compute_dtype_from_name("fp8").has_value());
    BOOST_TEST(compute_dtype_name(ComputeDtype::bf16) == "bf16");
    BOOST_TEST(!bf16_product_isa().empty());
}

BOOST_AUTO_TEST_CASE(bf16_linear_is_the_rounded_operands_product_in_fp32, *boost::unit_test::precondition(test::bf16_products_here)) {
    // Odd sizes: a ragged last column block (out = 600 over blocks of 256) and rows that are no
    // multiple of any vector width.
    const std::int64_t rows = 37, in = 300, out = 600;
    const std::vector<float> x = random_values(static_cast<std::size_t>(rows * in), 1), w = random_values(static_cast<std::size_t>(out * in), 2, 0.05f);
    const std::vector<float> bias = random_values(static_cast<std::size_t>(out), 3);
    const test::ComputeDtypeScope bf16;
    const std::vector<float> y = linear(x, rows, w, out, in, &bias);
    double worst = 0;
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < out; ++c) {
            double exact = 0, magnitude = 0;
            for (std::int64_t i = 0; i < in; ++i) {
                const double p = double(bf16_round(x[r * in + i])) * bf16_round(w[c * in + i]);
                exact += p;
                magnitude += std::fabs(p);
            }
            exact += bias[c];
            // FP32 accumulation of `in` products: a few ulps of the magnitude.
            worst = std::max(worst, std::fabs(y[r * out + c] - exact) / (magnitude * 0x1p-24 * in + 1e-30));
        }
    BOOST_TEST(worst < 1.0);
    // Not the FP32 product: BF16 rounding of the operands shows (relative ~1e-3).
    set_compute_dtype(ComputeDtype::f32);
    const std::vector<float> f = linear(x, rows, w, out, in, &bias);
    double diff = 0, energy = 0;
    for (std::size_t i = 0; i < f.size(); ++i) {
        diff += (f[i] - y[i]) * double(f[i] - y[i]);
        energy += f[i] * double(f[i]);
    }
    BOOST_TEST(std::sqrt(diff / energy) > 1e-4);
    BOOST_TEST(std::sqrt(diff / energy) < 1e-2);
}

BOOST_AUTO_TEST_CASE(bf16_products_do_not_depend_on_the_thread_count, *boost::unit_test::precondition(test::bf16_products_here)) {
    const std::int64_t rows = 300, in = 512, out = 1100, heads = 4, dim = 64;
    const std::vector<float> x = random_values(static_cast<std::size_t>(rows * in), 4), w = random_values(static_cast<std::size_t>(out * in), 5, 0.05f);
    const std::vector<float> q = random_values(static_cast<std::size_t>(rows * heads * dim), 6);
    const std::vector<float> k = random_values(q.size(), 7), v = random_values(q.size(), 8);
    const std::vector<std::int64_t> lengths = {260, 40};
    const test::ComputeDtypeScope bf16;
    auto run = [&](std::size_t threads) {
        const ThreadsAt at(threads);
        std::vector<float> y = linear(x, rows, w, out, in);
        std::vector<float> o(static_cast<std::size_t>(rows * heads * dim));
        causal_attention(q.data(), k.data(), v.data(), heads, heads / 2, dim, dim, lengths, 0.125f, o.data());
        y.insert(y.end(), o.begin(), o.end());
        return y;
    };
    const std::vector<float> one = run(1), two = run(2);
    BOOST_TEST(std::memcmp(one.data(), two.data(), one.size() * 4) == 0);
}

BOOST_AUTO_TEST_CASE(bf16_attention_matches_the_fp32_path_to_bf16_rounding,
                     *boost::unit_test::precondition(test::bf16_products_here)) {
    // Two samples, grouped-query heads, more than one query block (256) in the first.
    const std::int64_t q_heads = 4, kv_heads = 2, qk = 48, vd = 32;
    const std::vector<std::int64_t> lengths = {300, 17};
    const std::int64_t tokens = 317;
    const std::vector<float> q = random_values(static_cast<std::size_t>(tokens * q_heads * qk), 9);
    const std::vector<float> k = random_values(static_cast<std::size_t>(tokens * kv_heads * qk), 10);
    const std::vector<float> v = random_values(static_cast<std::size_t>(tokens * kv_heads * vd), 11);
    std::vector<float> f(static_cast<std::size_t>(tokens * q_heads * vd)), b(f.size());
    causal_attention(q.data(), k.data(), v.data(), q_heads, kv_heads, qk, vd, lengths, 0.15f, f.data());
    {
        const test::ComputeDtypeScope bf16;
        causal_attention(q.data(), k.data(), v.data(), q_heads, kv_heads, qk, vd, lengths, 0.15f, b.data());
    }
    double diff = 0, energy = 0;
    for (std::size_t i = 0; i < f.size(); ++i) {
        diff += (f[i] - b[i]) * double(f[i] - b[i]);
        energy += f[i] * double(f[i]);
    }
    const double rel = std::sqrt(diff / energy);
    BOOST_TEST(rel > 1e-4);  // the BF16 path ran
    BOOST_TEST(rel < 2e-2);
    // The first token sees only itself: its output is its value row, through P = 1 exactly.
    for (std::int64_t h = 0; h < q_heads; ++h)
        for (std::int64_t d = 0; d < vd; ++d)
            BOOST_TEST(b[h * vd + d] == bf16_round(v[(h / 2) * vd + d]));
}

BOOST_AUTO_TEST_SUITE_END()
