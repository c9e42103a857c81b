// FP8 block dequantization of a synthesized checkpoint equals an independent computation, bit
// for bit, for every FP8 tensor (routed experts with whole 128x128 blocks, attention and dense
// MLP weights with edge blocks).

#include "tensor_bytes.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/fp8_dequant.hpp>

#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <cstring>

using namespace moequant;
using namespace moequant::test;

namespace {

// E4M3FN decoded from its definition (model-families.md §4.1), in double.
double e4m3_value(std::uint8_t b) {
    const int sign = b >> 7, exponent = (b >> 3) & 15, mantissa = b & 7;
    if (exponent == 15 && mantissa == 7) return std::nan("");
    const double magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
    return sign ? -magnitude : magnitude;
}

// float -> bf16, round to nearest even, written out case by case.
std::uint16_t bf16_round(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
    std::uint32_t upper = u >> 16, lower = u & 0xFFFF;
    if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) ++upper;
    return static_cast<std::uint16_t>(upper);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(synth_fp8)

BOOST_AUTO_TEST_CASE(dequantized_synth_weights_match_an_independent_computation) {
    TempDir dir;
    auto r = run_command({host_executable().string(), "synth", "--family", "deepseek_v3", "--dtype", "fp8", "--out",
                          (dir / "ds").string()});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Checkpoint ckpt = Checkpoint::open(dir / "ds");
    std::size_t checked = 0, edge_tensors = 0;
    for (const auto& name : ckpt.tensor_names()) {
        const TensorInfo& info = ckpt.info(name);
        if (info.dtype != DType::F8_E4M3) continue;
        TensorView w = ckpt.view(name);
        TensorView s = ckpt.view(name + "_scale_inv");  // may live in another shard
        Tensor ours = dequantize_fp8_block(w, s, {128, 128}, {.tensor = name});
        const std::int64_t rows = w.shape[0], cols = w.shape[1], scale_cols = s.shape[1];
        if (rows % 128 || cols % 128) ++edge_tensors;
        for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j) {
                const auto k = static_cast<std::size_t>(i * cols + j);
                const float scale = element<float>(s, static_cast<std::size_t>((i / 128) * scale_cols + j / 128));
                const float product = static_cast<float>(e4m3_value(element<std::uint8_t>(w, k))) * scale;
                const std::uint16_t want = bf16_round(product);
                const std::uint16_t got = ours.data_as<std::uint16_t>()[k];
                if (got != want)
                    BOOST_FAIL(name << " [" << i << "," << j << "]: " << got << " != " << want);
            }
        ++checked;
    }
    BOOST_TEST(checked > 100u);
    BOOST_TEST(edge_tensors > 0u);
}

BOOST_AUTO_TEST_SUITE_END()
