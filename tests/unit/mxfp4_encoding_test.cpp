// The mxfp4 encoding (model-families-2026.md §2.1, §3.7, §3.8): DeepSeek-V4's 2-D I8 weights with
// E8M0 `.scale`, gpt-oss's fused `_blocks`/`_scales`; every E2M1 code under a range of scale bytes
// against the spec's formula (exact in F32 and BF16), the nibble order, windows against full
// decodes, and the refusals (exit 3: Error(input) naming tensor, expert, row and block).

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/parallel.hpp>

#include "encoding_checkpoint.hpp"
#include "error_code_of.hpp"
#include "reference_numerics.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <cstring>

using namespace moequant;
using namespace moequant::test;

namespace {

const std::vector<std::uint8_t> scale_bytes{0, 1, 100, 126, 127, 128, 200, 252};

// A row-major [rows, k] grid of codes and its [rows, k/32] scale bytes.
struct Mxfp4Values {
    std::int64_t rows, k;
    std::vector<std::uint8_t> codes, scales;

    std::uint8_t code(std::int64_t r, std::int64_t c) const { return codes[static_cast<std::size_t>(r * k + c)]; }
    std::uint8_t scale(std::int64_t r, std::int64_t c) const { return scales[static_cast<std::size_t>(r * (k / 32) + c / 32)]; }
    // The spec's value: ldexp(LUT[code], e - 127), computed apart from the plugin.
    float value(std::int64_t r, std::int64_t c) const {
        return static_cast<float>(std::ldexp(static_cast<double>(e2m1(code(r, c))), scale(r, c) - 127));
    }
    // Byte j of a row: element 2j in the low nibble, 2j+1 in the high one.
    std::vector<std::uint8_t> packed() const {
        std::vector<std::uint8_t> out(codes.size() / 2);
        for (std::size_t j = 0; j < out.size(); ++j)
            out[j] = static_cast<std::uint8_t>(codes[2 * j] | (codes[2 * j + 1] << 4));
        return out;
    }
};

// Every code at both column parities under every scale byte of the list: row r runs through the
// codes from r on, and its two blocks take scale bytes r and r + 3 (an odd shift flips the parity).
Mxfp4Values every_code_and_scale(std::int64_t rows) {
    Mxfp4Values v{rows, 64, {}, {}};
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < v.k; ++c) v.codes.push_back(static_cast<std::uint8_t>((c + r) % 16));
        v.scales.push_back(scale_bytes[static_cast<std::size_t>(r) % scale_bytes.size()]);
        v.scales.push_back(scale_bytes[static_cast<std::size_t>(r + 3) % scale_bytes.size()]);
    }
    return v;
}

std::vector<StoredTensor> deepseek_v4_tensors(const std::string& stem, const Mxfp4Values& v, DType packed = DType::I8,
                                              DType scale = DType::F8_E8M0) {
    return {{stem + ".weight", packed, {v.rows, v.k / 2}, v.packed()}, {stem + ".scale", scale, {v.rows, v.k / 32}, v.scales}};
}

// `v.rows` split into `experts` matrices, with the bias the model also stores.
std::vector<StoredTensor> gpt_oss_tensors(const std::string& x, const Mxfp4Values& v, std::int64_t experts) {
    const std::int64_t r = v.rows / experts;
    return {{x + "_blocks", DType::U8, {experts, r, v.k / 32, 16}, v.packed()},
            {x + "_scales", DType::U8, {experts, r, v.k / 32}, v.scales},
            {x + "_bias", DType::BF16, {experts, r}, std::vector<std::uint8_t>(static_cast<std::size_t>(v.rows) * 2, 0)}};
}

const std::string gpt_oss_config = R"({"model_type": "gpt_oss", "quantization_config": {"quant_method": "mxfp4",
    "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}})";
const std::string deepseek_v4_config = R"({"model_type": "deepseek_v4", "expert_dtype": "fp4", "quantization_config":
    {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128], "scale_fmt": "ue8m0", "activation_scheme": "dynamic"}})";

const std::string down = "model.layers.0.mlp.experts.down_proj";
const std::string w1 = "layers.0.ffn.experts.0.w1";

// Every element of matrix `m` of `w` (rows `v` from m * rows on) against the formula, F32 bit for
// bit (the sign of zero included) and BF16 as its nearest-even rounding (exact here).
void check_against_formula(const Checkpoint& c, const EncodedWeight& w, const Mxfp4Values& v, std::int64_t m) {
    const std::int64_t rows = w.shape[w.shape.size() - 2];
    const Tensor f32 = decode_matrix(c, w, m, DecodeTarget::f32);
    const auto bf16 = bf16_values(decode_matrix(c, w, m, DecodeTarget::bf16));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t col = 0; col < v.k; ++col) {
            const auto i = static_cast<std::size_t>(r * v.k + col);
            const float want = v.value(m * rows + r, col);
            if (std::bit_cast<std::uint32_t>(f32.data_as<float>()[i]) != std::bit_cast<std::uint32_t>(want))
                BOOST_FAIL("F32 differs at matrix " << m << " row " << r << " column " << col << ": " << f32.data_as<float>()[i]
                                                    << " != " << want);
            if (bf16[i] != bf16_round(want)) BOOST_FAIL("BF16 differs at matrix " << m << " row " << r << " column " << col);
            if (bf16_value(bf16[i]) != want) BOOST_FAIL("BF16 is not exact at matrix " << m << " row " << r << " column " << col);
        }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mxfp4_encoding)

BOOST_AUTO_TEST_CASE(e2m1_reference_is_the_spec_table) {
    const float table[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (std::uint8_t code = 0; code < 16; ++code)
        BOOST_TEST(std::bit_cast<std::uint32_t>(e2m1(code)) == std::bit_cast<std::uint32_t>(table[code]), "code " << int(code));
}

BOOST_AUTO_TEST_CASE(deepseek_v4_every_code_and_scale_byte_decodes_to_the_formula) {
    const Mxfp4Values v = every_code_and_scale(16);
    for (DType packed : {DType::I8, DType::U8})
        for (DType scale : {DType::F8_E8M0, DType::U8})
            for (const std::string& config : {deepseek_v4_config, std::string("{}")}) {
                BOOST_TEST_CONTEXT(dtype_name(packed) << " codes, " << dtype_name(scale) << " scales, config " << config) {
                    TempDir dir;
                    Checkpoint c = write_checkpoint(dir, deepseek_v4_tensors(w1, v, packed, scale), config);
                    const EncodedWeight& w = c.weight(w1 + ".weight");
                    BOOST_TEST(w.encoding == "mxfp4");
                    BOOST_TEST(w.input_type == "mxfp4");
                    BOOST_TEST((w.shape == Shape{16, 64}));
                    BOOST_TEST(w.primary() == w1 + ".weight");
                    BOOST_TEST(w.tensor("packed") == w1 + ".weight");
                    BOOST_TEST(w.tensor("scale") == w1 + ".scale");
                    BOOST_TEST(*w.parameters.get("layout") == "deepseek-v4");
                    BOOST_TEST(*w.parameters.get("block") == "32");
                    BOOST_TEST(w.stored_bytes == 16u * 32 + 16 * 2);
                    BOOST_TEST(contains(w.summary, "MXFP4 E2M1, 32-element E8M0 blocks"), w.summary);
                    BOOST_TEST(c.weight_holding(w1 + ".scale") == &w);
                    BOOST_TEST(c.weight_holding(w1 + ".weight") == &w);
                    check_against_formula(c, w, v, 0);
                }
            }
}

BOOST_AUTO_TEST_CASE(gpt_oss_every_code_and_scale_byte_decodes_to_the_formula) {
    const Mxfp4Values v = every_code_and_scale(24);  // 3 experts of 8 rows
    for (const std::string& config : {gpt_oss_config, std::string("{}")}) {
        BOOST_TEST_CONTEXT("config " << config) {
            TempDir dir;
            auto tensors = gpt_oss_tensors(down, v, 3);
            tensors.push_back({"model.norm.scale", DType::BF16, {64}, std::vector<std::uint8_t>(128, 0)});
            Checkpoint c = write_checkpoint(dir, tensors, config);
            const EncodedWeight* w = c.find_weight(down);  // no tensor has the weight's own name
            BOOST_REQUIRE(w);
            BOOST_TEST(w->encoding == "mxfp4");
            BOOST_TEST((w->shape == Shape{3, 8, 64}));
            BOOST_TEST(w->tensor("packed") == down + "_blocks");
            BOOST_TEST(w->tensor("scale") == down + "_scales");
            BOOST_TEST(w->tensors.size() == 2u);  // the bias is not part of the weight
            BOOST_TEST(*w->parameters.get("layout") == "gpt-oss");
            BOOST_TEST(w->summary == "MXFP4 E2M1, 32-element E8M0 blocks (gpt-oss fused)");
            BOOST_TEST(c.weight_holding(down + "_blocks") == w);
            BOOST_TEST(c.weight_holding(down + "_scales") == w);
            BOOST_TEST(c.weight_holding(down + "_bias") != w);
            BOOST_TEST(c.find_weight("model.norm.weight") == nullptr);  // a 1-D `.scale` is nobody's scale
            for (std::int64_t m = 0; m < 3; ++m) check_against_formula(c, *w, v, m);
        }
    }
}

BOOST_AUTO_TEST_CASE(the_low_nibble_is_the_even_column) {
    Mxfp4Values v{1, 32, std::vector<std::uint8_t>(32, 0), {127}};
    TempDir dir;
    auto tensors = deepseek_v4_tensors(w1, v, DType::U8);
    tensors[0].bytes[0] = 0x71;  // columns 0, 1: codes 1 (0.5) and 7 (6)
    tensors[0].bytes[1] = 0xA8;  // columns 2, 3: codes 8 (-0) and A (-1)
    Checkpoint c = write_checkpoint(dir, tensors);
    const Tensor f32 = decode_matrix(c, c.weight(w1 + ".weight"), 0, DecodeTarget::f32);
    const float* got = f32.data_as<float>();
    BOOST_TEST(got[0] == 0.5f);
    BOOST_TEST(got[1] == 6.0f);
    BOOST_TEST(std::bit_cast<std::uint32_t>(got[2]) == 0x80000000u);
    BOOST_TEST(got[3] == -1.0f);
    BOOST_TEST(got[4] == 0.0f);
}

BOOST_AUTO_TEST_CASE(fp8_weights_with_e8m0_scale_siblings_stay_fp8) {
    TempDir dir;  // DeepSeek-V4's attention: block FP8 with the same `.scale` name
    auto tensors = deepseek_v4_tensors(w1, every_code_and_scale(4));
    tensors.push_back({"layers.0.attn.wq.weight", DType::F8_E4M3, {128, 128}, std::vector<std::uint8_t>(128 * 128, 0x38)});
    tensors.push_back({"layers.0.attn.wq.scale", DType::F8_E8M0, {1, 1}, {127}});
    Checkpoint c = write_checkpoint(dir, tensors, deepseek_v4_config);
    BOOST_TEST(c.weight("layers.0.attn.wq.weight").encoding == "fp8");
    BOOST_TEST(c.weight(w1 + ".weight").encoding == "mxfp4");
}

BOOST_AUTO_TEST_CASE(windows_equal_slices_of_a_full_decode) {
    Mxfp4Values one_block{6, 32, {}, {}};
    for (std::int64_t i = 0; i < 6 * 32; ++i) one_block.codes.push_back(static_cast<std::uint8_t>((i * 7) % 16));
    one_block.scales = {120, 127, 130, 0, 252, 1};
    const Mxfp4Values two_blocks = every_code_and_scale(12);
    TempDir dir;
    auto tensors = deepseek_v4_tensors("k32", one_block);
    for (auto& t : deepseek_v4_tensors(w1, two_blocks)) tensors.push_back(t);
    for (auto& t : gpt_oss_tensors(down, two_blocks, 3)) tensors.push_back(t);
    Checkpoint c = write_checkpoint(dir, tensors);
    const EncodedWeight& k32 = c.weight("k32.weight");
    const EncodedWeight& flat = c.weight(w1 + ".weight");
    const EncodedWeight& fused = c.weight(down);
    check_against_formula(c, k32, one_block, 0);
    for (DecodeTarget target : {DecodeTarget::bf16, DecodeTarget::f32}) {
        const Tensor full_k32 = decode_matrix(c, k32, 0, target), full_flat = decode_matrix(c, flat, 0, target);
        std::vector<Tensor> full_fused;
        for (std::int64_t m = 0; m < 3; ++m) full_fused.push_back(decode_matrix(c, fused, m, target));
        auto check = [&](const Tensor& full, const EncodedWeight& w, const DecodeWindow& window) {
            check_window_against(full, c, w, window, target);
        };
        for (int threads : {1, 3}) {
            BOOST_TEST_CONTEXT((target == DecodeTarget::f32 ? "F32" : "BF16") << ", threads " << threads) {
                set_max_threads(threads);
                check(full_k32, k32, {.row_begin = 1, .row_end = 6, .row_step = 2, .col_begin = 3, .col_end = 30});
                // Inside the second block, starting on a high nibble and ending on a low one.
                check(full_flat, flat, {.row_begin = 0, .row_end = 12, .col_begin = 41, .col_end = 57});
                check(full_flat, flat, {.row_begin = 1, .row_end = 12, .row_step = 2, .col_begin = 40, .col_end = 64});
                check(full_flat, flat, {.row_begin = 2, .row_end = 11, .row_step = 3, .col_begin = 31, .col_end = 33});
                // An adapter reads gpt-oss's interleaved gate and up rows with row_step 2 from row 0 or 1.
                for (std::int64_t m = 0; m < 3; ++m) {
                    const Tensor& full = full_fused[static_cast<std::size_t>(m)];
                    check(full, fused, {.matrix = m, .row_begin = 0, .row_end = 4, .row_step = 2, .col_end = 64});
                    check(full, fused, {.matrix = m, .row_begin = 1, .row_end = 4, .row_step = 2, .col_begin = 5, .col_end = 38});
                }
                set_max_threads(0);
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(scale_bytes_above_252_are_refused_where_a_window_meets_them) {
    for (std::uint8_t bad : {std::uint8_t{253}, std::uint8_t{254}, std::uint8_t{255}}) {
        BOOST_TEST_CONTEXT("scale byte " << int(bad)) {
            const std::string code = bad == 255 ? "NaNScale" : "ScaleOverflow";
            Mxfp4Values v = every_code_and_scale(12);
            v.scales[static_cast<std::size_t>(7 * 2 + 1)] = bad;  // row 7 (expert 1, row 3 of 4), block 1
            TempDir dir;
            auto tensors = deepseek_v4_tensors(w1, v);
            for (auto& t : gpt_oss_tensors(down, v, 3)) tensors.push_back(t);
            Checkpoint c = write_checkpoint(dir, tensors);

            const EncodedWeight& flat = c.weight(w1 + ".weight");  // recognition reads no data
            Error e = error_of([&] { decode_matrix(c, flat); }, ErrorKind::input);
            BOOST_TEST(e.code() == code);
            BOOST_TEST(e.context().tensor == w1 + ".scale");
            BOOST_TEST(contains(e.message(), "row 7 "), e.message());
            BOOST_TEST(contains(e.message(), "block 1 (columns 32..63)"), e.message());
            BOOST_TEST(contains(e.message(), std::to_string(bad)), e.message());

            const EncodedWeight& fused = c.weight(down);
            e = error_of([&] { decode_matrix(c, fused, 1, DecodeTarget::f32); }, ErrorKind::input);
            BOOST_TEST(e.code() == code);
            BOOST_TEST(e.context().tensor == down + "_scales");
            BOOST_TEST(contains(e.message(), "block 1 (columns 32..63) of row 3 of expert 1"), e.message());

            // Windows that do not touch the block decode.
            std::vector<std::byte> out(12 * 32 * 4);
            decode_weight(c, flat, {.row_end = 12, .col_end = 32}, DecodeTarget::f32, out);
            decode_matrix(c, fused, 0);
            decode_matrix(c, fused, 2);
        }
    }
}

BOOST_AUTO_TEST_CASE(a_refusal_is_thrown_whatever_the_thread_split) {
    Mxfp4Values v{8192, 64, std::vector<std::uint8_t>(8192 * 64, 3), std::vector<std::uint8_t>(8192 * 2, 127)};
    v.scales[100 * 2 + 1] = 253;
    v.scales[8000 * 2] = 255;
    TempDir dir;
    Checkpoint c = write_checkpoint(dir, deepseek_v4_tensors(w1, v));
    for (int threads : {1, 3}) {
        set_max_threads(threads);
        const Error e = error_of([&] { decode_matrix(c, c.weight(w1 + ".weight")); }, ErrorKind::input);
        BOOST_TEST((e.code() == "ScaleOverflow" || e.code() == "NaNScale"), e.code());
        const bool first = e.code() == "ScaleOverflow" && contains(e.message(), "block 1 (columns 32..63) of row 100 ");
        const bool second = e.code() == "NaNScale" && contains(e.message(), "block 0 (columns 0..31) of row 8000 ");
        BOOST_TEST((first || second), e.message());
    }
    set_max_threads(0);
}

BOOST_AUTO_TEST_CASE(undecodable_layouts_are_refused_at_recognition) {
    const Mxfp4Values v = every_code_and_scale(4);
    auto code_of = [&](std::vector<StoredTensor> tensors, const std::string& weight) {
        TempDir dir;
        Checkpoint c = write_checkpoint(dir, tensors);
        return error_code_of([&] { c.weight(weight); }, ErrorKind::input);
    };
    auto flat = [&](auto edit) {
        auto t = deepseek_v4_tensors(w1, v);
        edit(t);
        return code_of(t, w1 + ".weight");
    };
    auto fused = [&](auto edit) {
        auto t = gpt_oss_tensors(down, v, 2);
        edit(t);
        return code_of(t, down);
    };
    BOOST_TEST(flat([](auto&) {}) == "");
    BOOST_TEST(fused([](auto&) {}) == "");
    BOOST_TEST(flat([](auto& t) { t[1].shape = {4, 1};
        t[1].bytes.resize(4); }) == "ScaleShapeMismatch");
    BOOST_TEST(flat([](auto& t) { t[1].shape = {2, 4}; }) == "ScaleShapeMismatch");
    BOOST_TEST(flat([](auto& t) { t[1].shape = {8}; }) == "ScaleShapeMismatch");
    BOOST_TEST(flat([](auto& t) { t[0].dtype = DType::F4;
        t[0].shape = {4, 64}; }) == "UnsupportedDtype");
    BOOST_TEST(fused([](auto& t) { t[1].shape = {2, 2, 4};
        t[1].bytes.resize(16); }) == "ScaleShapeMismatch");
    BOOST_TEST(fused([](auto& t) { t[0].shape = {2, 2, 4, 8}; }) == "BlockShapeMismatch");
    BOOST_TEST(fused([](auto& t) { t.erase(t.begin() + 1); }) == "MissingScale");
    BOOST_TEST(fused([](auto& t) { t.erase(t.begin()); }) == "MissingBlocks");

    // K = 2 x 24 = 48 is no whole number of blocks, even with ceil(48 / 32) scales.
    TempDir dir;
    Checkpoint c = write_checkpoint(dir, {{"m.weight", DType::I8, {4, 24}, std::vector<std::uint8_t>(96, 0)},
                                                  {"m.scale", DType::F8_E8M0, {4, 2}, std::vector<std::uint8_t>(8, 127)}});
    const Error e = error_of([&] { c.weight("m.weight"); }, ErrorKind::input);
    BOOST_TEST(e.code() == "ScaleShapeMismatch");
    BOOST_TEST(contains(e.message(), "[4,24]"), e.message());
    BOOST_TEST(contains(e.message(), "[4,2]"), e.message());
    BOOST_TEST(contains(e.message(), "K = 48"), e.message());
}

BOOST_AUTO_TEST_CASE(compressed_tensors_mxfp4_is_refused_for_its_unknown_scale_bias) {
    const Mxfp4Values v = every_code_and_scale(4);
    const std::vector<StoredTensor> tensors{{"m.weight_packed", DType::U8, {4, 32}, v.packed()},
                                            {"m.weight_scale", DType::U8, {4, 2}, v.scales}};
    const std::string config = R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
        "version": "0.12.2", "config_groups": {"group_0": {"targets": ["Linear"], "format": "mxfp4-pack-quantized",
        "weights": {"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32, "symmetric": true}}}}})";
    for (const std::string& cfg : {config, std::string("{}")}) {
        BOOST_TEST_CONTEXT("config " << cfg) {
            TempDir dir;
            Checkpoint c = write_checkpoint(dir, tensors, cfg);
            const Error e = error_of([&] { c.weight("m.weight"); }, ErrorKind::input);
            BOOST_TEST(e.code() == "UnsupportedEncoding");
            BOOST_TEST(e.context().tensor == "m.weight_packed");
            BOOST_TEST(contains(e.message(), "mxfp4-pack-quantized"), e.message());
            BOOST_TEST(contains(e.message(), "127 or 125"), e.message());
            BOOST_TEST(contains(e.message(), "by 4"), e.message());
        }
    }
    // INT4 pack-quantized (I32 words, BF16 scales) is another encoding's; mxfp4 leaves it alone.
    TempDir dir;
    Checkpoint c = write_checkpoint(dir, {{"q.weight_packed", DType::I32, {4, 8}, std::vector<std::uint8_t>(128, 0)},
                                                  {"q.weight_scale", DType::BF16, {4, 2}, std::vector<std::uint8_t>(16, 0)}},
                                            R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": true,
        "strategy": "group", "group_size": 32}}}}})");
    BOOST_TEST(c.weight("q.weight").encoding == "ct-pack");
}

BOOST_AUTO_TEST_SUITE_END()
