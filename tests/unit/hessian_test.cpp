// HessianAccumulator against a float64 reference computed here, on a matrix with several
// (ragged) tiles, fed in several add() calls: every entry, and the same bytes with one thread
// as with all of them. The tiles run concurrently through oneDNN (matrix_products.hpp), so this
// is also the check that concurrent calls into it are safe. And the edges: a Hessian that saw
// no token is zero (its buffer starts unwritten), and one is finished once.
#include "bf16_products_here.hpp"

#include <moequant/compute_dtype.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/engine/hessian.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <vector>

using namespace moequant;

namespace {

constexpr std::int64_t columns = 1100, tokens = 1200, samples = 3;

std::vector<float> random_inputs() {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(columns * tokens));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (i % columns < 20 ? 8.0f : 1.0f) + 0.5f;
    return x;
}

Tensor accumulate(const std::vector<float>& x) {
    HessianAccumulator h(columns);
    for (std::int64_t s = 0; s < samples; ++s) h.add(x.data() + s * (tokens / samples) * columns, tokens / samples);
    return h.finish(samples);
}

// The same as accumulate(x) for BF16-exact x, given as BF16 views of each sample (recorded
// activations).
Tensor accumulate_bf16_view(const std::vector<float>& x) {
    std::vector<std::uint16_t> bits(x.size());
    convert_f32_to_bf16(x.data(), bits.data(), bits.size());
    HessianAccumulator h(columns);
    const std::int64_t per_sample = tokens / samples;
    for (std::int64_t s = 0; s < samples; ++s)
        h.add(TensorView{DType::BF16, {per_sample, columns},
                         std::as_bytes(std::span(bits).subspan(static_cast<std::size_t>(s * per_sample * columns),
                                                                static_cast<std::size_t>(per_sample * columns)))});
    return h.finish(samples);
}

std::vector<float> bf16_exact(std::vector<float> x) {
    for (float& v : x) v = bf16_to_f32(f32_to_bf16(v));
    return x;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hessian)

BOOST_AUTO_TEST_CASE(every_entry_matches_a_float64_reference) {
    for (const bool bf16 : {false, bf16_products_available()}) {
        BOOST_TEST_CONTEXT((bf16 ? "BF16 products of BF16-exact inputs" : "FP32")) {
            const std::vector<float> x = bf16 ? bf16_exact(random_inputs()) : random_inputs();
            std::optional<test::ComputeDtypeScope> products;  // BF16-exact inputs become BF16 products (hessian.hpp)
            if (bf16) products.emplace();
            const Tensor h = accumulate(x);
            const float* got = h.data_as<float>();
            std::vector<double> reference(static_cast<std::size_t>(columns * columns), 0.0);
            for (std::int64_t t = 0; t < tokens; ++t) {
                const float* row = x.data() + t * columns;
                for (std::int64_t i = 0; i < columns; ++i)
                    for (std::int64_t j = 0; j <= i; ++j) reference[i * columns + j] += 2.0 * row[i] * row[j];
            }
            std::int64_t off = 0;
            for (std::int64_t i = 0; i < columns; ++i)
                for (std::int64_t j = 0; j <= i; ++j) {
                    const double want = reference[i * columns + j] / samples;
                    const double scale = std::sqrt(reference[i * columns + i] * reference[j * columns + j]) / samples;
                    if (std::fabs(got[i * columns + j] - want) > 1e-5 * scale) ++off;
                    if (got[i * columns + j] != got[j * columns + i]) ++off;  // symmetric
                }
            BOOST_TEST(off == 0);
        }
    }
}

BOOST_AUTO_TEST_CASE(bf16_products_serve_bf16_exact_inputs_only, *boost::unit_test::precondition(test::bf16_products_here)) {
    const std::vector<float> inexact = random_inputs(), exact = bf16_exact(inexact);
    const Tensor f32_inexact = accumulate(inexact), f32_exact = accumulate(exact);
    const test::ComputeDtypeScope products;
    // Inputs BF16 cannot hold: the FP32 path, byte for byte.
    const Tensor inexact_h = accumulate(inexact);
    BOOST_TEST(std::memcmp(inexact_h.data(), f32_inexact.data(), inexact_h.size_bytes()) == 0);
    // BF16-exact inputs: exact 2 x_i x_j products in another order (so other bytes), the bytes of one thread.
    const Tensor exact_h = accumulate(exact);
    BOOST_TEST(std::memcmp(exact_h.data(), f32_exact.data(), exact_h.size_bytes()) != 0);
    const std::size_t threads = max_threads();
    set_max_threads(1);
    const Tensor one = accumulate(exact);
    set_max_threads(threads);
    BOOST_TEST(std::memcmp(one.data(), exact_h.data(), one.size_bytes()) == 0);
    // The same inputs as a BF16 view (recorded activations): their bits go in as they are.
    const Tensor view_h = accumulate_bf16_view(exact);
    BOOST_TEST(std::memcmp(view_h.data(), exact_h.data(), view_h.size_bytes()) == 0);
}

BOOST_AUTO_TEST_CASE(a_bf16_view_with_fp32_products_is_its_widened_values) {
    // Recorded BF16 activations under FP32 products are widened and scaled in one pass: the
    // bytes of adding the widened floats.
    const test::ComputeDtypeScope products(ComputeDtype::f32);
    const std::vector<float> exact = bf16_exact(random_inputs());
    const Tensor from_floats = accumulate(exact);
    const Tensor view_h = accumulate_bf16_view(exact);
    BOOST_TEST(std::memcmp(view_h.data(), from_floats.data(), view_h.size_bytes()) == 0);
}

BOOST_AUTO_TEST_CASE(the_bytes_do_not_depend_on_the_thread_count) {
    const std::vector<float> x = random_inputs();
    const std::size_t threads = max_threads();
    set_max_threads(1);
    const Tensor one = accumulate(x);
    set_max_threads(threads);
    for (int run = 0; run < 3; ++run) {
        const Tensor all = accumulate(x);
        BOOST_TEST(std::memcmp(one.data(), all.data(), one.size_bytes()) == 0);
    }
}

BOOST_AUTO_TEST_CASE(no_token_gives_zero_and_a_hessian_is_finished_once) {
    HessianAccumulator h(columns);
    h.add(nullptr, 0);
    const Tensor zero = h.finish(samples);
    BOOST_TEST(zero.shape() == (Shape{columns, columns}));
    const float* z = zero.data_as<float>();
    BOOST_TEST(std::all_of(z, z + zero.elements(), [](float v) { return v == 0.0f; }));
    BOOST_CHECK_THROW(h.finish(samples), Error);
    const std::vector<float> x = random_inputs();
    BOOST_CHECK_THROW(h.add(x.data(), 1), Error);
}

BOOST_AUTO_TEST_SUITE_END()
