// The GGUF K-quant and Q8_0 row codecs under every vector ISA this CPU has (moequant/cpu_isa.hpp) write
// the scalar path's bytes, on rows made to reach the searches' corners: magnitudes from
// subnormal to 1e30, flat and constant sub-blocks, a lone outlier, one-signed rows, and
// importance matrices with zeros. The scalar path itself is held to ggml's bytes by
// ggml_quants_golden; together they hold every path to ggml.

#include "ggml_types.hpp"

#include <boost/test/unit_test.hpp>

#include <moequant/cpu_isa.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace moequant;

namespace {

struct Row {
    std::string name;
    std::vector<float> x;
};

// Rows of n values: each kind of content, in each of the given magnitudes.
std::vector<Row> corner_rows(std::int64_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::uniform_real_distribution<float> uniform(0.f, 1.f);
    std::vector<Row> rows;
    auto add = [&](std::string name, const std::function<float(std::int64_t)>& value) {
        Row r{std::move(name), std::vector<float>(static_cast<std::size_t>(n))};
        for (std::int64_t i = 0; i < n; ++i) r.x[static_cast<std::size_t>(i)] = value(i);
        rows.push_back(std::move(r));
    };
    for (float scale : {1e-30f, 1e-20f, 1e-5f, 1.f, 1e5f, 1e20f, 1e30f}) {
        char at[32];
        std::snprintf(at, sizeof at, " at %g", static_cast<double>(scale));
        add(std::string("normal") + at, [&](std::int64_t) { return scale * normal(rng); });
        add(std::string("negative") + at, [&](std::int64_t) { return -scale * std::abs(normal(rng)); });
        add(std::string("positive") + at, [&](std::int64_t) { return scale * uniform(rng); });
        add(std::string("constant") + at, [&](std::int64_t) { return scale; });
        add(std::string("negative constant") + at, [&](std::int64_t) { return -scale; });
        add(std::string("outlier") + at, [&](std::int64_t i) { return i == n / 3 ? 1e30f : scale * normal(rng); });
        add(std::string("few levels") + at, [&](std::int64_t) { return scale * static_cast<float>(static_cast<int>(4 * uniform(rng))); });
    }
    add("zeros", [](std::int64_t) { return 0.f; });
    add("negative zeros", [](std::int64_t) { return -0.f; });
    add("subnormal", [&](std::int64_t) { return 1e-40f * normal(rng); });
    add("subnormal constant", [](std::int64_t) { return 1e-44f; });
    // Neighbouring sub-blocks (neighbouring lanes) of very different kinds.
    add("mixed sub-blocks", [&](std::int64_t i) {
        switch ((i / 16) % 6) {
        case 0: return 0.f;
        case 1: return 0.5f;
        case 2: return normal(rng);
        case 3: return -1e25f * std::abs(normal(rng));
        case 4: return 1e-38f * normal(rng);
        default: return static_cast<float>(i % 7) - 3.f;
        }
    });
    // Sub-blocks of 16 and 32 whose extremes of opposite sign are near each other in magnitude
    // (the searches' levels reach both ends in some lanes), beside one-signed ones.
    add("near-symmetric extremes", [&](std::int64_t i) {
        const float ratios[] = {1.f, 0.99f, 0.97f, 0.95f, 0.8f};
        const std::int64_t k = i / 16;
        const float sign = k % 3 ? 1.f : -1.f;
        if (i % 16 == k % 16) return sign;
        if (i % 16 == (k + 5) % 16) return -sign * ratios[k % 5];
        return (k % 7 == 6 ? 0.5f : 0.9f) * (2 * uniform(rng) - 1) * (k % 4 ? 1.f : 1e-3f);
    });
    // Non-finite values (ggml does not refuse them; the paths must still agree).
    add("infinity", [&](std::int64_t i) { return i % 37 == 5 ? INFINITY : normal(rng); });
    add("nan", [&](std::int64_t i) { return i % 41 == 7 ? NAN : normal(rng); });
    add("max float", [&](std::int64_t i) { return i % 2 ? 3.4e38f : -3.4e38f * uniform(rng); });
    add("spread magnitudes", [&](std::int64_t i) { return std::ldexp(normal(rng), static_cast<int>((i / 32) % 200) - 100); });
    return rows;
}

// Importance matrices for n columns: none, positive, with zeros (single columns and whole
// sub-blocks), all zero, and of a wide range.
std::vector<std::pair<std::string, std::vector<float>>> importances(std::int64_t n, unsigned seed) {
    std::mt19937 rng(seed + 1000);
    std::uniform_real_distribution<float> uniform(0.f, 1.f);
    std::vector<std::pair<std::string, std::vector<float>>> out;
    auto add = [&](std::string name, const std::function<float(std::int64_t)>& value) {
        std::vector<float> w(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) w[static_cast<std::size_t>(i)] = value(i);
        out.emplace_back(std::move(name), std::move(w));
    };
    out.emplace_back("no importance", std::vector<float>());
    add("importance", [&](std::int64_t) { return uniform(rng); });
    add("importance with zeros", [&](std::int64_t i) { return i % 5 == 0 || (i / 32) % 7 == 3 ? 0.f : uniform(rng); });
    add("zero importance", [](std::int64_t) { return 0.f; });
    add("wide importance", [&](std::int64_t) { return std::pow(10.f, 20 * uniform(rng) - 10); });
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ggml_quants_isa)

BOOST_AUTO_TEST_CASE(every_isa_writes_the_scalar_paths_k_quant_bytes) {
    const Isa before = active_isa();
    const std::vector<Isa> isas = available_isas();
    BOOST_TEST_MESSAGE("ISAs here: " << isas.size());
    // One super-block (AVX-512 lanes left empty), and nine: more than one chunk of eight, the
    // last group of lanes part-filled.
    for (std::int64_t n : {256, 2304}) {
        for (unsigned seed : {1u, 2u, 3u}) {
            const std::vector<Row> rows = corner_rows(n, seed);
            const auto weights = importances(n, seed);
            for (const char* type_name : {"q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K"}) {
                const auto& type = *ggml_quants::ggml_type_named(type_name);
                const auto bytes = static_cast<std::size_t>(type.row_bytes(n));
                for (const Row& row : rows)
                    for (const auto& [weight_name, w] : weights) {
                        const float* importance = w.empty() ? nullptr : w.data();
                        std::vector<std::uint8_t> scalar(bytes), vector(bytes);
                        set_isa_limit(Isa::scalar);
                        type.quantize(row.x.data(), scalar.data(), n, importance);
                        for (Isa isa : isas) {
                            if (isa == Isa::scalar) continue;
                            set_isa_limit(isa);
                            std::fill(vector.begin(), vector.end(), std::uint8_t{0xA5});
                            type.quantize(row.x.data(), vector.data(), n, importance);
                            BOOST_TEST(std::memcmp(scalar.data(), vector.data(), bytes) == 0,
                                       type_name << " " << isa_name(isa) << ", " << row.name << ", " << weight_name
                                                 << ", n " << n << ", seed " << seed);
                        }
                    }
            }
        }
    }
    set_isa_limit(before);
}

BOOST_AUTO_TEST_SUITE_END()
