// The calibrated kt quantizers (amx-int4-gptq, amx-int8-gptq, and MOE_INT8's moe-int8-gptq,
// whose gate/up and down variants pack blocks of 32 and 64 rows), loaded as the host loads them:
// - the packer they use lays kt-kernel's own codes (shared/golden/kt-amx, decoded) out into
//   exactly kt-kernel's bytes, so any codes they choose are in the runtime's layout;
// - on correlated inputs their output error tr(dW H dW^T) is well below plain AMX's, every
//   row scale lies in [0.5, 1] x kt-kernel's, and stored_problem() accepts their output but
//   names a tampered scale (MOE_INT8: also a -128 code, and a column sum not of the codes);
// - the bytes do not depend on the thread count.

#include "amx_layout.hpp"
#include "built_plugin.hpp"
#include "tensor_bytes.hpp"
#include "test_support.hpp"

#include <moequant/engine/hessian.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <random>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

std::uint16_t bf16_of(float x) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
    return static_cast<std::uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}

// A weight [n, k] ~ N(0, 0.02) in BF16 and inputs whose columns are strongly correlated (a few
// shared directions plus noise, some columns much louder: what hidden states look like).
struct Problem {
    std::int64_t n = 64, k = 256;
    std::vector<std::uint16_t> weight;
    Tensor hessian;
    explicit Problem(std::uint64_t seed) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        weight.resize(static_cast<std::size_t>(n * k));
        for (auto& w : weight) w = bf16_of(0.02f * normal(rng));
        const std::int64_t tokens = 1024, directions = 8;
        std::vector<float> basis(static_cast<std::size_t>(directions * k)), loud(static_cast<std::size_t>(k));
        for (auto& b : basis) b = normal(rng);
        for (std::int64_t c = 0; c < k; ++c) loud[c] = c % 17 == 0 ? 8.0f : 1.0f;
        std::vector<float> x(static_cast<std::size_t>(tokens * k));
        for (std::int64_t t = 0; t < tokens; ++t) {
            float mix[8];
            for (float& m : mix) m = normal(rng);
            for (std::int64_t c = 0; c < k; ++c) {
                float v = 0.3f * normal(rng);
                for (std::int64_t d = 0; d < directions; ++d) v += mix[d] * basis[d * k + c];
                x[t * k + c] = v * loud[c];
            }
        }
        HessianAccumulator acc(k);
        acc.add(x.data(), tokens);
        hessian = acc.finish(1);
    }
    TensorView view() const {
        return {DType::BF16, {n, k}, std::as_bytes(std::span<const std::uint16_t>(weight))};
    }
    std::vector<float> values() const {
        std::vector<float> v(weight.size());
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::bit_cast<float>(static_cast<std::uint32_t>(weight[i]) << 16);
        return v;
    }
    double error(const Quantizer& q, const QuantizedTensor& t) const {
        const Tensor decoded = q.dequantize(t, {n, k});
        return output_error(hessian, values().data(), decoded.data_as<float>(), n);
    }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(amx_calibrated)

BOOST_AUTO_TEST_CASE(the_packer_lays_kt_kernels_codes_out_as_kt_kernel_does) {
    const BuiltPlugin plugin("moequant-quantizer-amx");
    const fs::path golden = golden_dir() / "kt-amx";
    const auto manifest = json::parse(read_text(golden / "manifest.json")).as_object();
    std::size_t compared = 0;
    for (const auto& case_value : manifest.at("cases").as_array()) {
        const auto& c = case_value.as_object();
        if (c.at("kind").as_string() != "matrix") continue;
        const std::int64_t n = c.at("n").to_number<std::int64_t>(), k = c.at("k").to_number<std::int64_t>();
        for (const auto& [method, id, m] : {std::tuple{"int8", "amx-int8", amx::Method::int8}, std::tuple{"int4", "amx-int4", amx::Method::int4}}) {
            BOOST_TEST_CONTEXT(c.at("name").as_string() << " " << method) {
                const auto& expected = c.at("outputs").at(method).as_object();
                const auto codes = read_bytes(golden / std::string(expected.at("weight").at("path").as_string()));
                const auto scales = read_bytes(golden / std::string(expected.at("scale").at("path").as_string()));
                QuantizedTensor stored;
                Tensor w = Tensor::uninitialized(DType::I8, {static_cast<std::int64_t>(codes.size())});
                std::memcpy(w.data(), codes.data(), codes.size());
                Tensor s = Tensor::uninitialized(DType::F32, {n});
                std::memcpy(s.data(), scales.data(), scales.size());
                stored.parts.emplace_back("weight", std::move(w));
                stored.parts.emplace_back("scale", std::move(s));
                // Decode kt-kernel's bytes to integer codes (value / step), then pack them again.
                const Tensor decoded = plugin.quantizer(id).dequantize(stored, {n, k});
                const float* d = stored.part("scale")->data_as<float>();
                std::vector<std::int8_t> q(static_cast<std::size_t>(n * k), 0);  // an all-zero row (d = 0) keeps codes 0
                for (std::int64_t r = 0; r < n; ++r) {
                    const float step = m == amx::Method::int8 ? d[r] : 16.0f * d[r];
                    if (d[r] == 0) continue;
                    for (std::int64_t col = 0; col < k; ++col)
                        q[r * k + col] = static_cast<std::int8_t>(std::nearbyint(decoded.data_as<float>()[r * k + col] / step));
                }
                std::vector<std::uint8_t> packed(codes.size());
                amx::pack_codes(m, n, k, q.data(), packed.data());
                BOOST_TEST((packed == codes));
                ++compared;
            }
        }
    }
    BOOST_TEST(compared >= 4u);
}

BOOST_AUTO_TEST_CASE(calibrated_codes_cut_the_output_error_and_keep_the_scale_rule) {
    const BuiltPlugin plugin("moequant-quantizer-amx");
    const Problem problem(7);
    for (const auto& [plain_id, calibrated_id, bound] :
         {std::tuple{"amx-int4", "amx-int4-gptq", 0.6}, std::tuple{"amx-int8", "amx-int8-gptq", 0.9}}) {
        BOOST_TEST_CONTEXT(calibrated_id) {
            const Quantizer& plain = plugin.quantizer(plain_id);
            const Quantizer& calibrated = plugin.quantizer(calibrated_id);
            BOOST_REQUIRE(calibrated.calibration());
            BOOST_TEST(calibrated.facts().get_string("kt.method", "") == plain.facts().get_string("kt.method", ""));
            BOOST_TEST(calibrated.facts().get_string("verify.reference", "") == plain_id);
            BOOST_TEST(!calibrated.error_bounds(plain.quantize(problem.view()), {problem.n, problem.k}).has_value());
            const auto prepared = calibrated.calibration()->prepare_calibration(problem.hessian);
            const QuantizedTensor q = calibrated.calibration()->quantize_calibrated(problem.view(), *prepared);
            BOOST_TEST(q.method == plain.facts().get_string("kt.method", ""));
            const double ratio = problem.error(calibrated, q) / problem.error(plain, plain.quantize(problem.view()));
            BOOST_TEST_MESSAGE(calibrated_id << " output error / plain: " << ratio);
            BOOST_TEST(ratio < bound);
            BOOST_TEST(calibrated.stored_problem(q, problem.view()).empty(), calibrated.stored_problem(q, problem.view()));
            // A row scale above kt-kernel's is no scale the search could have chosen.
            QuantizedTensor tampered;
            for (const auto& [name, t] : q.parts) tampered.parts.emplace_back(name, Tensor::copy_of(t.view()));
            tampered.parts[1].second.data_as<float>()[3] *= 2.5f;  // above d_kt whatever f was
            BOOST_TEST(calibrated.stored_problem(tampered, problem.view()).find("row 3") != std::string::npos);
            // Without calibration data there are no codes to choose.
            BOOST_CHECK_THROW(calibrated.quantize(problem.view()), Error);
        }
    }
}

BOOST_AUTO_TEST_CASE(calibrated_moe_int8_cuts_the_output_error_in_both_block_layouts) {
    const BuiltPlugin plugin("moequant-quantizer-moe_int");
    const Problem problem(7);
    const Quantizer& plain_registered = plugin.quantizer("moe-int8");
    const Quantizer& registered = plugin.quantizer("moe-int8-gptq");
    BOOST_REQUIRE(registered.calibration());
    BOOST_TEST(registered.facts().get_string("kt.method", "") == "MOE_INT8");
    BOOST_TEST(registered.facts().get_string("kt.file_prefix", "") == "MOE_INT8");
    BOOST_TEST(registered.facts().get_string("verify.reference", "") == "moe-int8");
    BOOST_CHECK_THROW(registered.output_layout({problem.n, problem.k}), Error);  // only its variants pack
    const auto prepared = registered.calibration()->prepare_calibration(problem.hessian);
    for (const Projection p : {Projection::gate, Projection::down}) {
        BOOST_TEST_CONTEXT((p == Projection::down ? "down (64-row blocks)" : "gate (32-row blocks)")) {
            const Quantizer& plain = plain_registered.quantizer_for({0, p});
            const Quantizer& calibrated = registered.quantizer_for({0, p});
            BOOST_REQUIRE(calibrated.calibration());
            BOOST_TEST((calibrated.output_layout({problem.n, problem.k})[0].shape == plain.output_layout({problem.n, problem.k})[0].shape));
            // The variant takes the registered object's preparation (the host prepares gate/up once).
            const QuantizedTensor q = calibrated.calibration()->quantize_calibrated(problem.view(), *prepared);
            BOOST_TEST(q.method == "MOE_INT8");
            const QuantizedTensor rtn = plain.quantize(problem.view());
            const double ratio = problem.error(calibrated, q) / problem.error(plain, rtn);
            BOOST_TEST_MESSAGE("moe-int8-gptq output error / plain: " << ratio);
            BOOST_TEST(ratio < 0.9);
            // Plain moe-int8's own checks (column sums, padding) hold too.
            BOOST_TEST(plain.stored_problem(q, problem.view()).empty(), plain.stored_problem(q, problem.view()));
            BOOST_TEST(calibrated.stored_problem(q, problem.view()).empty(), calibrated.stored_problem(q, problem.view()));
            const Tensor decoded = calibrated.dequantize(q, {problem.n, problem.k});
            const float* d = q.part("scale")->data_as<float>();
            std::size_t moved_scales = 0;
            for (std::int64_t r = 0; r < problem.n; ++r) {
                moved_scales += d[r] != rtn.part("scale")->data_as<float>()[r];
                for (std::int64_t c = 0; c < problem.k; ++c) {
                    // q * d / d is q up to the division's rounding.
                    const float code = decoded.data_as<float>()[r * problem.k + c] / d[r];
                    BOOST_TEST(std::fabs(code) < 127.5f);
                    BOOST_TEST(std::fabs(code - std::nearbyint(code)) < 1e-4f);
                }
            }
            BOOST_TEST(moved_scales > 0u);  // the search chose scales below kt's
            auto tampered = [&](auto edit) {
                QuantizedTensor t;
                for (const auto& [name, part] : q.parts) t.parts.emplace_back(name, Tensor::copy_of(part.view()));
                edit(t);
                return calibrated.stored_problem(t, problem.view());
            };
            BOOST_TEST(contains(tampered([](QuantizedTensor& t) { t.parts[1].second.data_as<float>()[3] *= 2.5f; }), "row 3"));
            // Row 0's first code set to -128 without its column sum: both are named.
            const std::string lowest = tampered([](QuantizedTensor& t) { t.parts[0].second.data_as<std::uint8_t>()[0] = 0x80; });
            BOOST_TEST(contains(lowest, "code(s) -128"), lowest);
            BOOST_TEST(contains(lowest, "column sum"), lowest);
            BOOST_CHECK_THROW(calibrated.quantize(problem.view()), Error);
        }
    }
}

BOOST_AUTO_TEST_CASE(the_bytes_do_not_depend_on_the_thread_count) {
    const BuiltPlugin plugin("moequant-quantizer-amx");
    const Problem problem(11);
    const Quantizer& q = plugin.quantizer("amx-int4-gptq");
    const auto prepared = q.calibration()->prepare_calibration(problem.hessian);
    const std::size_t before = max_threads();
    set_max_threads(1);
    const QuantizedTensor one = q.calibration()->quantize_calibrated(problem.view(), *prepared);
    set_max_threads(4);
    const QuantizedTensor four = q.calibration()->quantize_calibrated(problem.view(), *prepared);
    set_max_threads(before);
    BOOST_TEST(bytes_of(*one.part("weight")) == bytes_of(*four.part("weight")));
    BOOST_TEST(bytes_of(*one.part("scale")) == bytes_of(*four.part("scale")));
}

BOOST_AUTO_TEST_SUITE_END()
