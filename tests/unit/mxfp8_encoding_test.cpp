// The mxfp8 encoding (docs/encodings.md, MiniMax-M3's release): `<w>` F8_E4M3 [N, K] with
// `<w>_scale_inv` U8 or F8_E8M0 [N, K/32]; every E4M3 code under a range of scale bytes against
// the formula ldexp(e4m3(code), e - 127) computed here (exact in F32; BF16 its nearest-even
// rounding), windows against full decodes, what the fp8 encoding keeps, and the refusals (exit 3:
// Error(input) naming the tensor, row and block or column).

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>

#include "encoding_checkpoint.hpp"
#include "error_code_of.hpp"
#include "reference_numerics.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>

using namespace moequant;
using namespace moequant::test;

namespace {

const std::string w = "language_model.model.layers.3.block_sparse_moe.experts.0.w1.weight";
const std::string mxfp8_config =
    R"({"model_type": "minimax_m3_vl", "quantization_config": {"quant_method": "mxfp8", "activation_scheme": "dynamic",
        "weight_block_size": [1, 32]}})";

// A row-major [rows, 64] grid of codes and its [rows, 2] scale bytes.
struct Mxfp8Values {
    std::int64_t rows, k = 64;
    std::vector<std::uint8_t> codes, scales;

    std::uint8_t code(std::int64_t r, std::int64_t c) const { return codes[static_cast<std::size_t>(r * k + c)]; }
    std::uint8_t scale(std::int64_t r, std::int64_t c) const { return scales[static_cast<std::size_t>(r * (k / 32) + c / 32)]; }
    float value(std::int64_t r, std::int64_t c) const {
        return static_cast<float>(std::ldexp(static_cast<double>(e4m3(code(r, c))), scale(r, c) - 127));
    }
};

// Every finite E4M3 code (0x7F and 0xFF are NaN) in some row under each of the scale bytes.
Mxfp8Values every_code(const std::vector<std::uint8_t>& scale_bytes) {
    Mxfp8Values v{static_cast<std::int64_t>(scale_bytes.size()) * 4, 64, {}, {}};
    for (std::int64_t r = 0; r < v.rows; ++r) {
        for (std::int64_t c = 0; c < v.k; ++c) {
            std::uint8_t code = static_cast<std::uint8_t>((r % 4) * 64 + c);
            if ((code & 0x7F) == 0x7F) code ^= 0x01;  // not NaN
            v.codes.push_back(code);
        }
        v.scales.push_back(scale_bytes[static_cast<std::size_t>(r / 4)]);
        v.scales.push_back(scale_bytes[static_cast<std::size_t>((r / 4 + 1) % scale_bytes.size())]);
    }
    return v;
}

std::vector<StoredTensor> tensors_of(const Mxfp8Values& v, DType scale = DType::U8) {
    return {{w, DType::F8_E4M3, {v.rows, v.k}, v.codes}, {w + "_scale_inv", scale, {v.rows, v.k / 32}, v.scales}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mxfp8_encoding)

BOOST_AUTO_TEST_CASE(every_code_and_scale_byte_decodes_to_the_formula) {
    const Mxfp8Values v = every_code({0, 1, 60, 119, 127, 128, 200, 246});
    for (DType scale : {DType::U8, DType::F8_E8M0})
        for (const std::string& config : {mxfp8_config, std::string("{}")}) {
            BOOST_TEST_CONTEXT(dtype_name(scale) << " scales, config " << config) {
                TempDir dir;
                Checkpoint c = write_checkpoint(dir, tensors_of(v, scale), config);
                const EncodedWeight& weight = c.weight(w);
                BOOST_TEST(weight.encoding == "mxfp8");
                BOOST_TEST(weight.input_type == "mxfp8");
                BOOST_TEST(weight.tensor("scale") == w + "_scale_inv");
                BOOST_TEST(weight.summary == "MXFP8 E4M3, 32-element E8M0 blocks");
                BOOST_TEST(c.weight_holding(w + "_scale_inv") == &weight);
                const Tensor f32 = decode_matrix(c, weight, 0, DecodeTarget::f32);
                const auto bf16 = bf16_values(decode_matrix(c, weight, 0, DecodeTarget::bf16));
                for (std::int64_t r = 0; r < v.rows; ++r)
                    for (std::int64_t col = 0; col < v.k; ++col) {
                        const auto i = static_cast<std::size_t>(r * v.k + col);
                        const float want = v.value(r, col);
                        if (std::bit_cast<std::uint32_t>(f32.data_as<float>()[i]) != std::bit_cast<std::uint32_t>(want))
                            BOOST_FAIL("F32 differs at row " << r << " column " << col);
                        if (bf16[i] != bf16_round(want)) BOOST_FAIL("BF16 differs at row " << r << " column " << col);
                    }
            }
        }
}

BOOST_AUTO_TEST_CASE(windows_equal_slices_of_a_full_decode) {
    const Mxfp8Values v = every_code({100, 127, 130});
    TempDir dir;
    Checkpoint c = write_checkpoint(dir, tensors_of(v), mxfp8_config);
    const EncodedWeight& weight = c.weight(w);
    for (DecodeTarget target : {DecodeTarget::bf16, DecodeTarget::f32}) {
        const Tensor full = decode_matrix(c, weight, 0, target);
        check_window_against(full, c, weight, {.row_begin = 1, .row_end = 12, .row_step = 3, .col_begin = 31, .col_end = 33}, target);
        check_window_against(full, c, weight, {.row_begin = 0, .row_end = 12, .row_step = 2, .col_begin = 40, .col_end = 64}, target);
    }
}

BOOST_AUTO_TEST_CASE(block_fp8_and_per_channel_scales_stay_with_the_fp8_encoding) {
    TempDir dir;
    const Mxfp8Values v = every_code({127});
    auto tensors = tensors_of(v);
    tensors.push_back({"attn.weight", DType::F8_E4M3, {128, 128}, std::vector<std::uint8_t>(128 * 128, 0x38)});
    tensors.push_back({"attn.weight_scale_inv", DType::F32, {1, 1}, std::vector<std::uint8_t>{0, 0, 0x80, 0x3F}});
    Checkpoint c = write_checkpoint(dir, tensors,
                                    R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})");
    BOOST_TEST(c.weight("attn.weight").encoding == "fp8");
    BOOST_TEST(c.weight(w).encoding == "mxfp8");  // U8 scales of shape [N, K/32], whatever the config says
}

BOOST_AUTO_TEST_CASE(nan_codes_nan_scales_and_overflowing_scales_are_refused) {
    struct Case {
        std::size_t scale_index;  // row 5, block 1
        std::uint8_t scale, code;
        std::string error, tensor, where;
    };
    const std::vector<Case> cases = {
        {11, 255, 0x38, "NaNScale", w + "_scale_inv", "block 1 (columns 32..63) of row 5"},
        {11, 247, 0x38, "ScaleOverflow", w + "_scale_inv", "block 1 (columns 32..63) of row 5"},
        {11, 127, 0x7F, "NaNWeight", w, "row 5, column 40"},
        {11, 127, 0xFF, "NaNWeight", w, "row 5, column 40"},
    };
    for (const auto& k : cases) {
        BOOST_TEST_CONTEXT(k.error << " scale " << int(k.scale) << " code " << int(k.code)) {
            Mxfp8Values v = every_code({120, 127, 130});
            v.scales[k.scale_index] = k.scale;
            v.codes[static_cast<std::size_t>(5 * 64 + 40)] = k.code;
            TempDir dir;
            Checkpoint c = write_checkpoint(dir, tensors_of(v), mxfp8_config);
            const EncodedWeight& weight = c.weight(w);  // recognition reads no data
            const Error e = error_of([&] { decode_matrix(c, weight); }, ErrorKind::input);
            BOOST_TEST(e.code() == k.error);
            BOOST_TEST(e.context().tensor == k.tensor);
            BOOST_TEST(contains(e.message(), k.where), e.message());
            std::vector<std::byte> out(12 * 32 * 2);  // the first block of every row decodes
            decode_weight(c, weight, {.row_end = 12, .col_end = 32}, DecodeTarget::bf16, out);
        }
    }
    // 246 is the largest byte that keeps 448 x 2^(e - 127) finite in BF16.
    Mxfp8Values v = every_code({246});
    TempDir dir;
    Checkpoint c = write_checkpoint(dir, tensors_of(v), mxfp8_config);
    const auto bf16 = bf16_values(decode_matrix(c, c.weight(w)));
    for (std::uint16_t b : bf16) BOOST_TEST_REQUIRE((b & 0x7F80) != 0x7F80);
}

BOOST_AUTO_TEST_CASE(scales_of_another_shape_are_refused_when_the_config_says_mxfp8) {
    const Mxfp8Values v = every_code({127});
    auto tensors = tensors_of(v);
    tensors[1].shape = {v.rows, 1};
    tensors[1].bytes.resize(static_cast<std::size_t>(v.rows));
    TempDir dir;
    Checkpoint c = write_checkpoint(dir, tensors, mxfp8_config);
    const Error e = error_of([&] { c.weight(w); }, ErrorKind::input);
    BOOST_TEST(e.code() == "ScaleShapeMismatch");
    BOOST_TEST(e.context().tensor == w + "_scale_inv");
    BOOST_TEST(contains(e.message(), "expected U8 or F8_E8M0 [4,2]"), e.message());
}

BOOST_AUTO_TEST_SUITE_END()
