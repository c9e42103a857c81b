// The encoding plugins behind Checkpoint::weight(): recognition from headers and config, the
// value rule (one float32 multiply, nearest-even BF16), windows equal to slices of a full
// decode whatever the thread count, and the refusals (exit 3: Error(input) with a code).

#include <moequant/checkpoint.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/parallel.hpp>

#include "decode_windows.hpp"
#include "encoded_checkpoint.hpp"
#include "error_code_of.hpp"
#include "reference_numerics.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>

using namespace moequant;
using namespace moequant::test;

namespace {

// FP8 E4M3 codes avoiding the NaN bytes 0x7F and 0xFF.
std::vector<std::uint8_t> fp8_codes(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> out(n);
    for (auto& c : out) {
        do c = static_cast<std::uint8_t>(rng());
        while ((c & 0x7F) == 0x7F);
    }
    return out;
}

// Scales with many significant bits, so BF16 rounding of the products matters.
std::vector<float> odd_scales(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(1e-3f, 3e-2f);
    std::vector<float> out(n);
    for (auto& s : out) s = d(rng);
    return out;
}

// A one-file checkpoint with these tensors and config.json, the float and fp8 encodings attached.
Checkpoint write_checkpoint(const TempDir& dir, const std::vector<StoredTensor>& tensors, const std::string& config = "{}") {
    return write_encoded_checkpoint(dir, tensors, config, {"float", "fp8"});
}

std::string error_code(const std::function<void()>& f) {
    const std::string code = error_code_of(f, ErrorKind::input);
    return code.empty() ? "(no error)" : code;
}

const std::string block_config = R"({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}})";

std::string ct_fp8_config(const std::string& strategy) {
    return R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized",
              "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
              "strategy": ")" + strategy + R"(", "symmetric": true, "dynamic": false}}}}})";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(source_encodings)

BOOST_AUTO_TEST_CASE(fp8_per_channel_scales_of_every_dtype_decode_by_the_formula) {
    const std::int64_t n = 70, k = 300;
    const auto codes = fp8_codes(static_cast<std::size_t>(n * k), 1);
    const auto scales = odd_scales(static_cast<std::size_t>(n), 2);
    for (DType scale_dtype : {DType::F32, DType::BF16, DType::F8_E8M0})
        for (const Shape& scale_shape : {Shape{n}, Shape{n, 1}}) {
            BOOST_TEST_CONTEXT(dtype_name(scale_dtype) << " " << shape_to_string(scale_shape)) {
                TempDir dir;
                std::vector<float> used(scales.size());  // the scale values as stored
                std::vector<std::uint8_t> stored;
                for (std::size_t i = 0; i < scales.size(); ++i) {
                    if (scale_dtype == DType::F32) used[i] = scales[i];
                    if (scale_dtype == DType::BF16) used[i] = bf16_value(bf16_round(scales[i]));
                    if (scale_dtype == DType::F8_E8M0) used[i] = e8m0(static_cast<std::uint8_t>(120 + i % 10));
                }
                if (scale_dtype == DType::F32) stored = bytes_of(used);
                if (scale_dtype == DType::BF16) {
                    std::vector<std::uint16_t> b;
                    for (float s : scales) b.push_back(bf16_round(s));
                    stored = bytes_of(b);
                }
                if (scale_dtype == DType::F8_E8M0)
                    for (std::size_t i = 0; i < scales.size(); ++i) stored.push_back(static_cast<std::uint8_t>(120 + i % 10));
                Checkpoint c = write_checkpoint(dir,
                                                {{"m.weight", DType::F8_E4M3, {n, k}, codes},
                                                 {"m.weight_scale", scale_dtype, scale_shape, stored},
                                                 {"m.input_scale", DType::F32, {1}, bytes_of(std::vector<float>{0.5f})}},
                                                ct_fp8_config("channel"));
                const EncodedWeight& w = c.weight("m.weight");
                BOOST_TEST(w.encoding == "fp8");
                BOOST_TEST(w.input_type == "fp8");
                BOOST_TEST(*w.parameters.get("strategy") == "channel");
                BOOST_TEST(w.tensor("scale") == "m.weight_scale");
                BOOST_REQUIRE(w.ignored.size() == 1u);
                BOOST_TEST(w.ignored[0] == "m.input_scale");
                BOOST_TEST(c.weight_holding("m.input_scale") == &w);
                BOOST_TEST(c.weight_holding("m.weight_scale") == &w);
                const auto bf16 = bf16_values(decode_matrix(c, w));
                const Tensor f32 = decode_matrix(c, w, 0, DecodeTarget::f32);
                for (std::int64_t r = 0; r < n; ++r)
                    for (std::int64_t j = 0; j < k; ++j) {
                        const auto i = static_cast<std::size_t>(r * k + j);
                        const float product = e4m3(codes[i]) * used[static_cast<std::size_t>(r)];
                        if (bf16[i] != bf16_round(product)) BOOST_FAIL("BF16 differs at " << r << "," << j);
                        if (f32.data_as<float>()[i] != product) BOOST_FAIL("F32 differs at " << r << "," << j);
                    }
            }
        }
}

BOOST_AUTO_TEST_CASE(fp8_per_tensor_and_edge_blocks_decode_by_the_formula) {
    const std::int64_t n = 130, k = 200;  // partial edge blocks in both directions
    const auto codes = fp8_codes(static_cast<std::size_t>(n * k), 3);
    {
        TempDir dir;
        Checkpoint c = write_checkpoint(dir, {{"t.weight", DType::F8_E4M3, {n, k}, codes},
                                              {"t.weight_scale", DType::F32, {}, bytes_of(std::vector<float>{0.0123f})}});
        const EncodedWeight& w = c.weight("t.weight");
        BOOST_TEST(*w.parameters.get("strategy") == "tensor");
        const auto got = bf16_values(decode_matrix(c, w));
        for (std::size_t i = 0; i < got.size(); ++i)
            if (got[i] != bf16_round(e4m3(codes[i]) * 0.0123f)) BOOST_FAIL("per-tensor differs at " << i);
    }
    TempDir dir;
    const auto scales = odd_scales(4, 4);  // [2, 2] blocks of 128
    Checkpoint c = write_checkpoint(dir, {{"b.weight", DType::F8_E4M3, {n, k}, codes},
                                          {"b.weight_scale_inv", DType::F32, {2, 2}, bytes_of(scales)}},
                                    block_config);
    const EncodedWeight& w = c.weight("b.weight");
    BOOST_TEST(*w.parameters.get("strategy") == "block");
    const auto got = bf16_values(decode_matrix(c, w));
    for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t j = 0; j < k; ++j) {
            const auto i = static_cast<std::size_t>(r * k + j);
            const float s = scales[static_cast<std::size_t>((r / 128) * 2 + j / 128)];
            if (got[i] != bf16_round(e4m3(codes[i]) * s)) BOOST_FAIL("block differs at " << r << "," << j);
        }
}

BOOST_AUTO_TEST_CASE(windows_equal_slices_of_a_full_decode_whatever_the_thread_count) {
    const std::int64_t n = 96, k = 160;
    TempDir dir;
    std::vector<std::uint16_t> plain(static_cast<std::size_t>(3 * n * k));
    std::mt19937 rng(5);
    for (auto& v : plain) v = static_cast<std::uint16_t>(0x3C00 + rng() % 0x400);
    Checkpoint c = write_checkpoint(dir, {{"fused", DType::BF16, {3, n, k}, bytes_of(plain)},
                                          {"f.weight", DType::F8_E4M3, {n, k}, fp8_codes(static_cast<std::size_t>(n * k), 6)},
                                          {"f.weight_scale", DType::F32, {n, 1}, bytes_of(odd_scales(96, 7))}});
    for (const char* name : {"fused", "f.weight"}) {
        const EncodedWeight& w = c.weight(name);
        const std::int64_t m = w.shape.size() == 3 ? 2 : 0;
        for (DecodeTarget target : {DecodeTarget::bf16, DecodeTarget::f32}) {
            for (int threads : {1, 3}) {
                set_max_threads(threads);
                const DecodeWindow window{.matrix = m, .row_begin = 5, .row_end = 90, .row_step = 3, .col_begin = 17, .col_end = 150};
                BOOST_TEST(rows_differing_from_full_decode(c, w, window, target).empty(), name << " threads " << threads);
            }
            set_max_threads(0);
        }
    }
}

BOOST_AUTO_TEST_CASE(fp8_refusals_name_the_tensor_and_the_rule) {
    const Shape w_shape{64, 64};
    const auto codes = fp8_codes(64 * 64, 8);
    const auto one = bytes_of(std::vector<float>{0.01f});
    const auto per_row = bytes_of(odd_scales(64, 9));
    auto case_of = [&](const std::vector<StoredTensor>& extra, const std::string& config = "{}") {
        TempDir dir;
        std::vector<StoredTensor> tensors{{"x.weight", DType::F8_E4M3, w_shape, codes}};
        tensors.insert(tensors.end(), extra.begin(), extra.end());
        Checkpoint c = write_checkpoint(dir, tensors, config);
        return error_code([&] { c.weight("x.weight"); });
    };
    BOOST_TEST(case_of({}) == "MissingScale");
    BOOST_TEST(case_of({{"x.weight_scale", DType::F32, {}, one}, {"x.weight_scale_inv", DType::F32, {}, one}}) == "AmbiguousScale");
    BOOST_TEST(case_of({{"x.weight_scale", DType::F32, {32, 2}, bytes_of(odd_scales(64, 1))}}) == "MissingBlockSize");
    BOOST_TEST(case_of({{"x.weight_scale", DType::F32, {32}, bytes_of(odd_scales(32, 1))}}) == "ScaleShapeMismatch");
    BOOST_TEST(case_of({{"x.weight_scale", DType::F32, {1, 1, 1, 1}, one}}) == "ScaleShapeMismatch");
    BOOST_TEST(case_of({{"x.weight_scale", DType::F16, {}, {0, 60}}}) == "UnsupportedDtype");
    // The config and the scale's shape must agree.
    BOOST_TEST(case_of({{"x.weight_scale", DType::F32, {}, one}}, ct_fp8_config("channel")) == "ScaleShapeMismatch");
    BOOST_TEST(case_of({{"x.weight_scale", DType::F32, {64, 1}, per_row}}, ct_fp8_config("tensor")) == "ScaleShapeMismatch");
    BOOST_TEST(case_of({{"x.weight_scale", DType::F32, {64, 1}, per_row}}, block_config) == "ScaleShapeMismatch");
    BOOST_TEST(case_of({{"x.weight_scale", DType::F32, {1, 1}, one}}, ct_fp8_config("block")) == "UnsupportedEncoding");
    BOOST_TEST(case_of({{"x.weight_scale", DType::F32, {64, 1}, per_row}}, ct_fp8_config("channel")) == "(no error)");
}

BOOST_AUTO_TEST_CASE(unrecognised_weights_list_their_tensors_and_the_installed_encodings) {
    TempDir dir;
    Checkpoint c = write_checkpoint(dir, {{"q.weight_packed", DType::I32, {4, 2}, std::vector<std::uint8_t>(32, 0)},
                                          {"q.weight_scale", DType::BF16, {4, 1}, std::vector<std::uint8_t>(8, 0)},
                                          {"n.weight", DType::I64, {2}, std::vector<std::uint8_t>(16, 0)}});
    try {
        c.weight("q.weight");
        BOOST_FAIL("expected UnsupportedEncoding");
    } catch (const Error& e) {
        const std::string what = e.what();
        BOOST_TEST(e.code() == "UnsupportedEncoding");
        BOOST_TEST(what.find("q.weight_scale BF16 [4,1]") != std::string::npos, what);
        BOOST_TEST(e.context().hint.find("float, fp8") != std::string::npos, e.context().hint);
    }
    BOOST_TEST(c.find_weight("nothing.weight") == nullptr);
    BOOST_TEST(c.weight_holding("n.weight") == nullptr);  // no encoding reads I64 vectors
    BOOST_TEST(error_code([&] { c.weight("n.weight"); }) == "UnsupportedEncoding");
}

BOOST_AUTO_TEST_SUITE_END()
