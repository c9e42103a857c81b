// The `moe_int` quantizer plugin, loaded as the host loads it, against kt-kernel's own MOE_INT8
// bytes (tests/golden/data/kt-moe-int8: kt's GemmKernelInt8::BufferB::from_mat with kt's
// -O3 -ffast-math flags, reordered by a real AOCL-BLAS; tests/golden/reference/kt_moe_int8 made
// them). Each case is one expert matrix of one threadpool part, gate/up ('u') or down ('d').

#include "built_plugin.hpp"
#include "tensor_bytes.hpp"
#include "test_support.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

const fs::path vectors = fs::path(MOEQUANT_SOURCE_DIR) / "tests/golden/data/kt-moe-int8";

struct Case {
    std::string name;
    std::int64_t n, k;
    Projection projection;  // 'u' stands for gate and up, 'd' for down
    std::vector<std::uint8_t> input, weight, scale;
};

std::vector<Case> cases() {
    std::vector<Case> out;
    const auto manifest = json::parse(read_text(vectors / "cases.json")).as_object();
    for (const auto& value : manifest.at("cases").as_array()) {
        const auto& c = value.as_object();
        const auto& files = c.at("files").as_object();
        auto bytes = [&](const char* part) { return read_bytes(vectors / std::string(files.at(part).at("path").as_string())); };
        out.push_back({std::string(c.at("name").as_string()), c.at("n").to_number<std::int64_t>(), c.at("k").to_number<std::int64_t>(),
                       c.at("class").as_string() == "d" ? Projection::down : Projection::up, bytes("input"), bytes("weight"),
                       bytes("scale")});
    }
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(moe_int8_golden)

BOOST_AUTO_TEST_CASE(every_case_matches_kt_kernel_and_aocl_byte_for_byte) {
    BuiltPlugin plugin("moequant-quantizer-moe_int");
    const Quantizer& moe_int8 = plugin.quantizer("moe-int8");
    const std::vector<Case> all = cases();
    BOOST_TEST(all.size() >= 5u);
    for (const Case& c : all) {
        BOOST_TEST_CONTEXT("case " << c.name) {
            const TensorView view{DType::BF16, {c.n, c.k}, std::as_bytes(std::span<const std::uint8_t>(c.input))};
            for (Projection p : c.projection == Projection::down ? std::vector{Projection::down} : std::vector{Projection::gate, Projection::up}) {
                const Quantizer& q = moe_int8.quantizer_for({3, p});
                const QuantizedTensor packed = q.quantize(view);
                BOOST_TEST(packed.method == "MOE_INT8");
                BOOST_TEST(bytes_of(*packed.part("weight")) == c.weight);
                BOOST_TEST(bytes_of(*packed.part("scale")) == c.scale);
                // What verify reads back: the layout, the column sums, and values within the bound.
                BOOST_TEST(q.stored_problem(packed, view).empty());
                const Tensor back = q.dequantize(packed, {c.n, c.k});
                const Tensor bounds = *q.error_bounds(packed, {c.n, c.k});
                for (std::int64_t r = 0; r < c.n; ++r)
                    for (std::int64_t col = 0; col < c.k; ++col) {
                        std::uint16_t bits;
                        std::memcpy(&bits, c.input.data() + 2 * (r * c.k + col), 2);
                        const float x = bf16_to_f32(bits);
                        if (!(std::fabs(back.data_as<float>()[r * c.k + col] - x) <= bounds.data_as<float>()[r]))
                            BOOST_FAIL("row " << r << " col " << col << " decodes beyond its bound");
                    }
            }
        }
    }
}

// The same matrix in the other class is another layout: blocks of 64 rows are not two of 32.
BOOST_AUTO_TEST_CASE(gate_up_and_down_are_different_layouts) {
    BuiltPlugin plugin("moequant-quantizer-moe_int");
    const Quantizer& moe_int8 = plugin.quantizer("moe-int8");
    for (const Case& c : cases()) {
        if (c.n % 64 != 0) continue;
        const TensorView view{DType::BF16, {c.n, c.k}, std::as_bytes(std::span<const std::uint8_t>(c.input))};
        const QuantizedTensor up = moe_int8.quantizer_for({0, Projection::up}).quantize(view);
        const QuantizedTensor down = moe_int8.quantizer_for({0, Projection::down}).quantize(view);
        BOOST_TEST(bytes_of(*up.part("scale")) == bytes_of(*down.part("scale")));
        BOOST_TEST(up.part("weight")->size_bytes() == down.part("weight")->size_bytes());
        BOOST_TEST(bytes_of(*up.part("weight")) != bytes_of(*down.part("weight")));
    }
}

BOOST_AUTO_TEST_CASE(unpackable_shapes_name_the_rule) {
    BuiltPlugin plugin("moequant-quantizer-moe_int");
    const Quantizer& moe_int8 = plugin.quantizer("moe-int8");
    auto refused = [](const Quantizer& q, const Shape& shape, const std::string& text) {
        try {
            q.output_layout(shape);
            BOOST_ERROR("shape " << shape_to_string(shape) << " was not refused");
        } catch (const Error& e) {
            BOOST_TEST(e.code() == "UnpackableShape");
            BOOST_TEST(contains(e.what(), text), e.what());
        }
    };
    refused(moe_int8.quantizer_for({0, Projection::gate}), {48, 256}, "blocks of 32 output rows: 48 rows");
    refused(moe_int8.quantizer_for({0, Projection::down}), {96, 256}, "blocks of 64 output rows: 96 rows");
    refused(moe_int8.quantizer_for({0, Projection::up}), {32, 200000}, "overflow AOCL's int32 column sums");
    // The registered object packs nothing itself: a caller that skips quantizer_for() is a bug.
    BOOST_CHECK_THROW(moe_int8.output_layout({32, 256}), Error);
}

BOOST_AUTO_TEST_SUITE_END()
