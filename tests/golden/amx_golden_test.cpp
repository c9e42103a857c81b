// The `amx` quantizer plugin, loaded as the host loads it, against kt-kernel's own output
// (shared/golden/kt-amx): codes and scales byte for byte, on every ISA this CPU offers. The
// inputs are also regenerated from the README's generator, so the cases double as a check of
// the generator description.

#include "built_plugin.hpp"
#include "isa_limit_restorer.hpp"
#include "tensor_bytes.hpp"
#include "test_support.hpp"

#include <moequant/error.hpp>
#include <moequant/parallel.hpp>
#include <moequant/splitmix64.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <cstring>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

const fs::path golden = golden_dir() / "kt-amx";

// The README's input generator: splitmix64, Irwin-Hall(4) in float64, float32 RNE, BF16 RNE.
std::vector<std::uint16_t> generate(std::uint64_t seed, std::int64_t n, std::int64_t k) {
    SplitMix64 random(seed);
    std::vector<std::uint16_t> out(static_cast<std::size_t>(n * k));
    for (auto& v : out) {
        const double x = random.irwin_hall<4>() * 0.02;
        const std::uint32_t b = std::bit_cast<std::uint32_t>(static_cast<float>(x));
        v = static_cast<std::uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
    }
    return out;
}

std::uint16_t bf16_of(double x) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(static_cast<float>(x));
    return static_cast<std::uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}

// The README's edge rows 0..5.
void overwrite_edge_rows(std::vector<std::uint16_t>& m, std::int64_t k) {
    auto at = [&](std::int64_t r, std::int64_t c) -> std::uint16_t& { return m[static_cast<std::size_t>(r * k + c)]; };
    for (std::int64_t c = 0; c < k; ++c) at(0, c) = 0;
    at(1, (k / 2 + 3) % k) = 0x4100;
    for (std::int64_t c = 0; c < k; ++c) at(2, c) |= 0x8000;
    at(3, 0) = 0x3DE0;
    for (std::int64_t j = 1; j < k; ++j) at(3, j) = bf16_of((2.0 * (((j - 1) % 224) - 112) + 1) * std::ldexp(1.0, -11));
    at(4, 0) = 0x3DFE;
    for (std::int64_t j = 1; j < k; ++j) at(4, j) = bf16_of((2.0 * (((j - 1) % 254) - 127) + 1) * std::ldexp(1.0, -11));
    for (std::int64_t c = 0; c < k; ++c) at(5, c) = 0x3C24;
}

struct Loaded {
    BuiltPlugin amx{"moequant-quantizer-amx"};
    const Quantizer* int8 = &amx.quantizer("amx-int8");
    const Quantizer* int4 = &amx.quantizer("amx-int4");
};

}  // namespace

BOOST_AUTO_TEST_SUITE(amx_golden)

BOOST_AUTO_TEST_CASE(every_case_matches_kt_kernel_byte_for_byte_on_every_isa) {
    Loaded plugin;
    IsaLimitRestorer restore;
    const auto manifest = json::parse(read_text(golden / "manifest.json")).as_object();
    std::size_t compared = 0;
    for (const auto& case_value : manifest.at("cases").as_array()) {
        const auto& c = case_value.as_object();
        if (c.at("kind").as_string() != "matrix") continue;
        const std::string name(c.at("name").as_string());
        const std::int64_t n = c.at("n").to_number<std::int64_t>(), k = c.at("k").to_number<std::int64_t>();
        BOOST_TEST_CONTEXT("case " << name) {
            const auto input = read_bytes(golden / std::string(c.at("input").at("path").as_string()));
            // The generator of the README reproduces the stored input.
            auto generated = generate(c.at("seed").to_number<std::uint64_t>(), n, k);
            if (c.at("edge_rows").as_bool()) overwrite_edge_rows(generated, k);
            BOOST_TEST(input.size() == generated.size() * 2);
            BOOST_TEST(std::memcmp(input.data(), generated.data(), input.size()) == 0);

            TensorView view{DType::BF16, {n, k}, std::as_bytes(std::span<const std::uint8_t>(input))};
            for (const auto& [method, quantizer, kt_method] :
                 {std::tuple{"int8", plugin.int8, "AMXINT8"}, std::tuple{"int4", plugin.int4, "AMXINT4"}}) {
                const auto& expected = c.at("outputs").at(method).as_object();
                const auto want_codes = read_bytes(golden / std::string(expected.at("weight").at("path").as_string()));
                const auto want_scales = read_bytes(golden / std::string(expected.at("scale").at("path").as_string()));
                for (Isa isa : available_isas()) {
                    set_isa_limit(isa);
                    BOOST_TEST_CONTEXT(method << " on " << isa_name(isa)) {
                        QuantizedTensor q = quantizer->quantize(view);
                        BOOST_TEST(q.method == kt_method);
                        BOOST_TEST((q.part("weight")->dtype() == DType::I8));
                        BOOST_TEST((q.part("scale")->dtype() == DType::F32));
                        BOOST_TEST(bytes_of(*q.part("weight")) == want_codes);
                        BOOST_TEST(bytes_of(*q.part("scale")) == want_scales);
                        ++compared;
                    }
                }
            }
        }
    }
    BOOST_TEST(compared >= 12u);
}

// conventions.md §5: |error| <= 0.5 step (INT8) and, for INT4, 8.5/16 = 0.53125 step (the double
// rounding: x/d = 7.5 rounds to t = 8, which rounds away to 16), with the step d (INT8) or 16 d
// (INT4) of each row, plus the float32 rounding of the reference's x*inv.
BOOST_AUTO_TEST_CASE(dequantized_values_are_within_the_rounding_bound) {
    Loaded plugin;
    const std::int64_t n = 256, k = 512;
    const auto input = read_bytes(golden / "cases/a3_n256_k512/input.bf16.bin");
    TensorView view{DType::BF16, {n, k}, std::as_bytes(std::span<const std::uint8_t>(input))};
    for (const auto& [quantizer, bound, step_factor] : {std::tuple{plugin.int8, 0.5, 1.0}, std::tuple{plugin.int4, 8.5 / 16, 16.0}}) {
        QuantizedTensor q = quantizer->quantize(view);
        Tensor back = quantizer->dequantize(q, {n, k});
        for (std::int64_t r = 0; r < n; ++r) {
            const double step = step_factor * q.part("scale")->data_as<float>()[r];
            for (std::int64_t c = 0; c < k; ++c) {
                std::uint16_t bits;
                std::memcpy(&bits, input.data() + 2 * (r * k + c), 2);
                const double x = std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
                const double err = std::fabs(back.data_as<float>()[r * k + c] - x);
                // The reference multiplies by fl32(1/d) and rounds the product to float32 before
                // rounding to an integer: |x*inv - x/d| <= 128 * 2^-23 in code units, so a value just
                // inside half a step can land on the tie and round away (seen in this case).
                if (err > (bound + 128.0 * 0x1.0p-23) * step * (1 + 1e-6)) BOOST_FAIL("row " << r << " col " << c << ": error " << err << " > " << bound << " step");
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(unpackable_shapes_name_the_rule) {
    Loaded plugin;
    std::vector<std::uint16_t> data(48 * 128);
    TensorView view{DType::BF16, {48, 128}, std::as_bytes(std::span<const std::uint16_t>(data))};
    try {
        plugin.int4->quantize(view);
        BOOST_FAIL("expected an error");
    } catch (const Error& e) {
        BOOST_TEST(e.code() == "UnpackableShape");
        BOOST_TEST(std::string(e.what()).find("n = 48") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(output_does_not_depend_on_the_thread_count) {
    Loaded plugin;
    const auto input = read_bytes(golden / "cases/a5_n64_k7168/input.bf16.bin");
    std::vector<std::uint8_t> big;
    for (int i = 0; i < 8; ++i) big.insert(big.end(), input.begin(), input.end());  // 512 x 7168
    TensorView view{DType::BF16, {512, 7168}, std::as_bytes(std::span<const std::uint8_t>(big))};
    for (const Quantizer* q : {plugin.int8, plugin.int4}) {
        set_max_threads(1);
        auto one = q->quantize(view);
        set_max_threads(0);
        auto many = q->quantize(view);
        BOOST_TEST(bytes_of(*one.part("weight")) == bytes_of(*many.part("weight")));
        BOOST_TEST(bytes_of(*one.part("scale")) == bytes_of(*many.part("scale")));
    }
}

BOOST_AUTO_TEST_SUITE_END()
