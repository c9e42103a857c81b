// The autogptq encoding plugin (object "gptq"): AutoGPTQ/GPTQModel INT4 words packed by the
// spec's formulas here, decoded through Checkpoint::weight() — v1 and v2 zero points (a v1
// stored 15 is a zero of 0 with its borrow), act-order g_idx, group size −1, F16/BF16/F32
// scales, windows equal to slices of a full decode at any thread count, and the refusals.

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/parallel.hpp>

#include "encoding_checkpoint.hpp"
#include "gptq_reference.hpp"
#include "reference_numerics.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>

using namespace moequant;
using namespace moequant::test;

namespace {

const std::string P = "model.layers.1.mlp.experts.3.down_proj";

enum class Zeros { v1_autogptq, v1_gptqmodel, v2 };

// Random codes and zero points; g_idx = k / group, shuffled for act-order (every group keeps
// its size, its members land anywhere). AutoGPTQ's v1 writer cannot store a zero of 0.
GptqLinear random_linear(std::int64_t k, std::int64_t n, std::int64_t group, bool act_order, Zeros zeros, std::uint32_t seed) {
    std::mt19937 rng(seed);
    GptqLinear l;
    l.k = k;
    l.n = n;
    const std::int64_t g = group == -1 ? k : group;
    l.groups = (k + g - 1) / g;
    l.codes.resize(static_cast<std::size_t>(k * n));
    for (auto& c : l.codes) c = static_cast<std::uint8_t>(rng() % 16);
    l.zeros.resize(static_cast<std::size_t>(l.groups * n));
    const int lowest = zeros == Zeros::v1_autogptq ? 1 : 0;
    for (auto& z : l.zeros) z = lowest + static_cast<int>(rng() % static_cast<unsigned>(16 - lowest));
    for (std::int64_t i = 0; i < k; ++i) l.g_idx.push_back(static_cast<std::int32_t>(i / g));
    if (act_order) std::shuffle(l.g_idx.begin(), l.g_idx.end(), rng);
    return l;
}

// Scales with many significant bits, stored as `dtype`; l.scales gets the stored values.
std::vector<std::uint8_t> store_scales(GptqLinear& l, DType dtype, std::uint32_t seed) {
    std::mt19937 rng(seed);
    const std::size_t count = static_cast<std::size_t>(l.groups * l.n);
    l.scales.resize(count);
    std::vector<std::uint16_t> half(count);
    std::vector<float> full(count);
    for (std::size_t i = 0; i < count; ++i) {
        if (dtype == DType::F16) {  // exponents 2^-11 .. 2^-4, random 10-bit mantissas
            half[i] = static_cast<std::uint16_t>(((4 + rng() % 8) << 10) | (rng() & 1023));
            l.scales[i] = f16_value(half[i]);
        } else {
            const float s = std::ldexp(1.0f + static_cast<float>(rng() % 1000000) / 1e6f, -static_cast<int>(4 + rng() % 8));
            half[i] = bf16_round(s);
            full[i] = s;
            l.scales[i] = dtype == DType::BF16 ? bf16_value(half[i]) : s;
        }
    }
    return dtype == DType::F32 ? bytes_of(full) : bytes_of(half);
}

std::vector<std::int32_t> pack_zeros(const GptqLinear& l, Zeros zeros) {
    switch (zeros) {
        case Zeros::v1_autogptq: return pack_gptq_qzeros_v1_autogptq(l);
        case Zeros::v1_gptqmodel: return pack_gptq_qzeros_v1_gptqmodel(l);
        case Zeros::v2: break;
    }
    return pack_gptq_qzeros_v2(l);
}

std::vector<StoredTensor> gptq_tensors(const GptqLinear& l, Zeros zeros, DType scale_dtype, const std::vector<std::uint8_t>& scales,
                                       bool with_g_idx) {
    std::vector<StoredTensor> t{{P + ".qweight", DType::I32, {l.k / 8, l.n}, bytes_of(pack_gptq_qweight(l))},
                                {P + ".qzeros", DType::I32, {l.groups, l.n / 8}, bytes_of(pack_zeros(l, zeros))},
                                {P + ".scales", scale_dtype, {l.groups, l.n}, scales}};
    if (with_g_idx) t.push_back({P + ".g_idx", DType::I32, {l.k}, bytes_of(l.g_idx)});
    return t;
}

// quantization_config with quant_method gptq and these members.
std::string gptq_config(const std::string& members) {
    return R"({"model_type": "deepseek_v3", "quantization_config": {"quant_method": "gptq", )" + members + "}}";
}

std::string gptq_config(std::int64_t group, bool desc_act, Zeros zeros) {
    return gptq_config(R"("bits": 4, "group_size": )" + std::to_string(group) + R"(, "desc_act": )" +
                       (desc_act ? "true" : "false") + R"(, "sym": false, "checkpoint_format": ")" +
                       (zeros == Zeros::v2 ? "gptq_v2" : "gptq") + "\"");
}

Checkpoint write_gptq(const TempDir& dir, const std::vector<StoredTensor>& tensors, const std::string& config) {
    return write_checkpoint(dir, tensors, config);
}

// Every element of the weight against the formula: BF16 = bf16_round(f32 product) exactly, F32 =
// the product. Returns how many products BF16 cannot hold, so callers can insist on rounding.
std::size_t check_values(const Checkpoint& c, const EncodedWeight& w, const GptqLinear& l) {
    const auto bf16 = bf16_values(decode_matrix(c, w));
    const auto f32 = f32_values(decode_matrix(c, w, 0, DecodeTarget::f32));
    std::size_t inexact = 0;
    for (std::int64_t n = 0; n < l.n; ++n)
        for (std::int64_t k = 0; k < l.k; ++k) {
            const auto i = static_cast<std::size_t>(n * l.k + k);
            const float want = l.value(n, k);
            if (f32[i] != want) BOOST_FAIL("F32 differs at " << n << "," << k << ": " << f32[i] << " vs " << want);
            if (bf16[i] != bf16_round(want)) BOOST_FAIL("BF16 differs at " << n << "," << k);
            inexact += bf16_value(bf16_round(want)) != want;
        }
    return inexact;
}

struct Refusal {
    std::string code, tensor, what, hint;
};

Refusal refusal_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        BOOST_TEST((e.kind() == ErrorKind::input), e.what());
        return {e.code(), e.context().tensor, e.what(), e.context().hint};
    }
    return {"(no error)", "", "", ""};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gptq_encoding)

BOOST_AUTO_TEST_CASE(v1_and_v2_zero_points_decode_by_the_formula) {
    for (Zeros zeros : {Zeros::v1_autogptq, Zeros::v1_gptqmodel, Zeros::v2}) {
        BOOST_TEST_CONTEXT("zeros " << static_cast<int>(zeros)) {
            GptqLinear l = random_linear(256, 64, 32, false, zeros, 1);
            const auto scales = store_scales(l, DType::F16, 2);
            auto tensors = gptq_tensors(l, zeros, DType::F16, scales, true);
            tensors.push_back({P + ".bias", DType::BF16, {l.n}, std::vector<std::uint8_t>(static_cast<std::size_t>(l.n) * 2, 0)});
            TempDir dir;
            Checkpoint c = write_gptq(dir, tensors, gptq_config(32, false, zeros));
            const EncodedWeight& w = c.weight(P + ".weight");
            BOOST_TEST(w.encoding == "gptq");
            BOOST_TEST(w.input_type == "int4");
            BOOST_TEST((w.shape == Shape{64, 256}));
            BOOST_TEST(w.tensor("packed") == P + ".qweight");
            BOOST_TEST(w.tensor("zeros") == P + ".qzeros");
            BOOST_TEST(w.tensor("scale") == P + ".scales");
            BOOST_TEST(w.tensor("g_idx") == P + ".g_idx");
            BOOST_TEST(*w.parameters.get("bits") == "4");
            BOOST_TEST(*w.parameters.get("group") == "32");
            BOOST_TEST(*w.parameters.get("zeros") == (zeros == Zeros::v2 ? "v2" : "v1"));
            BOOST_TEST(*w.parameters.get("act_order") == "false");
            BOOST_TEST(w.summary == std::string("GPTQ INT4, group 32, F16 scales, ") + (zeros == Zeros::v2 ? "v2" : "v1") + " zeros");
            for (const char* part : {".qweight", ".qzeros", ".scales", ".g_idx"}) BOOST_TEST(c.weight_holding(P + part) == &w);
            BOOST_TEST(c.weight_holding(P + ".bias") != &w);  // the bias is its own (float) tensor
            BOOST_TEST(check_values(c, w, l) > 0u);
        }
    }
}

BOOST_AUTO_TEST_CASE(act_order_group_indices_choose_each_columns_group) {
    for (Zeros zeros : {Zeros::v1_autogptq, Zeros::v2}) {
        GptqLinear l = random_linear(512, 32, 64, true, zeros, 3);
        const auto scales = store_scales(l, DType::F16, 4);
        TempDir dir;
        Checkpoint c = write_gptq(dir, gptq_tensors(l, zeros, DType::F16, scales, true), gptq_config(64, true, zeros));
        const EncodedWeight& w = c.weight(P + ".weight");
        BOOST_TEST(*w.parameters.get("act_order") == "true");
        BOOST_TEST(w.summary.ends_with(", act-order"));
        check_values(c, w, l);
    }
}

BOOST_AUTO_TEST_CASE(group_size_minus_one_partial_and_small_groups) {
    {
        GptqLinear l = random_linear(160, 16, -1, false, Zeros::v2, 5);
        const auto scales = store_scales(l, DType::F16, 6);
        TempDir dir;
        Checkpoint c = write_gptq(dir, gptq_tensors(l, Zeros::v2, DType::F16, scales, false), gptq_config(-1, false, Zeros::v2));
        const EncodedWeight& w = c.weight(P + ".weight");
        BOOST_TEST(l.groups == 1);
        BOOST_TEST(*w.parameters.get("group") == "160");
        BOOST_TEST(w.tensor("g_idx").empty());
        BOOST_TEST(w.summary == "GPTQ INT4, group 160 (one per row), F16 scales, v2 zeros");
        check_values(c, w, l);
    }
    // 5 groups, the last of 8 features; and groups of 8, fewer than the decoder's table pays for.
    for (std::int64_t group : {48, 8}) {
        GptqLinear l = random_linear(200, 24, group, group == 8, Zeros::v1_autogptq, 7);
        const auto scales = store_scales(l, DType::F16, 8);
        TempDir dir;
        Checkpoint c = write_gptq(dir, gptq_tensors(l, Zeros::v1_autogptq, DType::F16, scales, group == 8),
                                  gptq_config(group, group == 8, Zeros::v1_autogptq));
        check_values(c, c.weight(P + ".weight"), l);
    }
}

BOOST_AUTO_TEST_CASE(bf16_and_f32_scales_round_the_float_product_once) {
    for (DType dtype : {DType::BF16, DType::F32}) {
        BOOST_TEST_CONTEXT(dtype_name(dtype)) {
            GptqLinear l = random_linear(128, 40, 32, true, Zeros::v2, 9);
            const auto scales = store_scales(l, dtype, 10);
            TempDir dir;
            Checkpoint c = write_gptq(dir, gptq_tensors(l, Zeros::v2, dtype, scales, true), gptq_config(32, true, Zeros::v2));
            const EncodedWeight& w = c.weight(P + ".weight");
            BOOST_TEST(*w.parameters.get("scale_dtype") == std::string(dtype_name(dtype)));
            BOOST_TEST(check_values(c, w, l) > 0u);  // some products need the BF16 rounding
        }
    }
}

// A true zero of 0 is stored 15 in v1, borrowing one from the next nibble (GPTQModel's export);
// the decoder adds 0x11111111 to the whole word, so both nibbles come back exactly.
BOOST_AUTO_TEST_CASE(v1_stored_fifteen_is_a_zero_of_zero_with_its_borrow) {
    GptqLinear l = random_linear(8, 16, -1, false, Zeros::v1_gptqmodel, 11);
    l.zeros = {0, 8, 8, 8, 8, 8, 8, 8, /* second word */ 8, 8, 8, 8, 8, 8, 8, 0};
    const auto words = pack_gptq_qzeros_v1_gptqmodel(l);
    BOOST_TEST(static_cast<std::uint32_t>(words[0]) == 0x7777776Fu);  // nibble 0 stored 15, nibble 1 lent one
    BOOST_TEST(static_cast<std::uint32_t>(words[1]) == 0xF7777777u);  // the top nibble's borrow leaves the word
    const auto scales = store_scales(l, DType::F16, 12);
    TempDir dir;
    Checkpoint c = write_gptq(dir, gptq_tensors(l, Zeros::v1_gptqmodel, DType::F16, scales, true),
                              gptq_config(-1, false, Zeros::v1_gptqmodel));
    check_values(c, c.weight(P + ".weight"), l);

    // Symmetric v1: every zero 8, every word 0x77777777.
    l.zeros.assign(16, 8);
    BOOST_TEST(static_cast<std::uint32_t>(pack_gptq_qzeros_v1_autogptq(l)[0]) == 0x77777777u);
    TempDir sym;
    Checkpoint s = write_gptq(sym, gptq_tensors(l, Zeros::v1_autogptq, DType::F16, scales, true),
                              gptq_config(-1, false, Zeros::v1_autogptq));
    check_values(s, s.weight(P + ".weight"), l);
}

BOOST_AUTO_TEST_CASE(config_spellings_of_gptqmodel_and_text_config) {
    GptqLinear l = random_linear(64, 8, 32, false, Zeros::v2, 13);
    const auto scales = store_scales(l, DType::F16, 14);
    const auto tensors = gptq_tensors(l, Zeros::v2, DType::F16, scales, true);
    for (const std::string config :
         {R"({"quantization_config": {"method": "gptq", "format": "gptq_v2", "checkpoint_format": "gptq_v2", "bits": 4,
              "group_size": 32, "pack_dtype": "int32", "dynamic": {"-:.*lm_head.*": {}}}})",
          R"({"text_config": {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32,
              "format": "gptq_v2"}}})"}) {
        TempDir dir;
        Checkpoint c = write_gptq(dir, tensors, config);
        const EncodedWeight& w = c.weight(P + ".weight");
        BOOST_TEST(*w.parameters.get("zeros") == "v2");
        check_values(c, w, l);
    }
}

BOOST_AUTO_TEST_CASE(windows_equal_slices_of_a_full_decode_whatever_the_thread_count) {
    // 768 rows of 1024: decode_weight splits a full decode into chunks of 256 rows.
    GptqLinear l = random_linear(1024, 768, 128, true, Zeros::v1_autogptq, 15);
    const auto scales = store_scales(l, DType::F16, 16);
    TempDir dir;
    Checkpoint c = write_gptq(dir, gptq_tensors(l, Zeros::v1_autogptq, DType::F16, scales, true),
                              gptq_config(128, true, Zeros::v1_autogptq));
    const EncodedWeight& w = c.weight(P + ".weight");
    const std::vector<DecodeWindow> windows{{.row_begin = 5, .row_end = 700, .row_step = 3, .col_begin = 13, .col_end = 1001},
                                            {.row_begin = 1, .row_end = 768, .row_step = 7, .col_begin = 8, .col_end = 16},
                                            {.row_begin = 100, .row_end = 101, .col_begin = 1023, .col_end = 1024},
                                            {.row_begin = 17, .row_end = 18, .col_begin = 0, .col_end = 1024},
                                            {.row_begin = 0, .row_end = 768, .row_step = 2, .col_begin = 3, .col_end = 5}};
    for (DecodeTarget target : {DecodeTarget::bf16, DecodeTarget::f32}) {
        std::vector<Tensor> full;
        for (int threads : {1, 3}) {
            set_max_threads(threads);
            full.push_back(decode_matrix(c, w, 0, target));
            for (const auto& window : windows) check_window_against(full.back(), c, w, window, target);
        }
        set_max_threads(0);
        BOOST_TEST(std::memcmp(full[0].data(), full[1].data(), full[0].size_bytes()) == 0);
    }
}

BOOST_AUTO_TEST_CASE(group_indices_outside_the_scales_are_refused_at_decode) {
    for (std::int32_t bad : {4, -1}) {
        GptqLinear l = random_linear(128, 16, 32, true, Zeros::v2, 17);
        const auto scales = store_scales(l, DType::F16, 18);
        l.g_idx[37] = bad;
        TempDir dir;
        Checkpoint c = write_gptq(dir, gptq_tensors(l, Zeros::v2, DType::F16, scales, true), gptq_config(32, true, Zeros::v2));
        const EncodedWeight& w = c.weight(P + ".weight");  // recognition reads headers only
        for (const DecodeWindow& window : {DecodeWindow{.row_end = 16, .col_end = 128}, DecodeWindow{.row_end = 1, .col_end = 8}}) {
            const Refusal r = refusal_of([&] {
                std::vector<std::byte> out(static_cast<std::size_t>(window.rows() * window.cols()) * 2);
                decode_weight(c, w, window, DecodeTarget::bf16, out);
            });
            BOOST_TEST(r.code == "GroupIndexOutOfRange");
            BOOST_TEST(r.tensor == P + ".g_idx");
            BOOST_TEST(r.what.find("entry 37 is " + std::to_string(bad)) != std::string::npos, r.what);
        }
    }
}

BOOST_AUTO_TEST_CASE(refusals_name_the_tensor_and_the_rule) {
    GptqLinear l = random_linear(128, 16, 32, false, Zeros::v2, 19);
    const auto scales = store_scales(l, DType::F16, 20);
    const auto good = gptq_tensors(l, Zeros::v2, DType::F16, scales, true);
    const std::string config = gptq_config(32, false, Zeros::v2);
    // The tensors with one of them replaced (or removed when `replacement` has no name).
    auto with = [&](const std::string& name, const StoredTensor& replacement) { return with_replaced(good, name, replacement); };
    auto refusal = [&](const std::vector<StoredTensor>& tensors, const std::string& cfg,
                       const std::function<void(TempDir&)>& prepare = {}) {
        TempDir dir;
        if (prepare) prepare(dir);
        Checkpoint c = write_gptq(dir, tensors, cfg);
        return refusal_of([&] { c.weight(P + ".weight"); });
    };
    auto expect = [&](const Refusal& r, const std::string& code, const std::string& tensor) {
        BOOST_TEST(r.code == code, r.what);
        BOOST_TEST(r.tensor == tensor, r.what);
    };
    const std::string qweight = P + ".qweight";
    const auto zeros_bytes = [](std::int64_t n) { return std::vector<std::uint8_t>(static_cast<std::size_t>(n) * 4, 0); };

    BOOST_TEST(refusal(good, config).code == "(no error)");
    expect(refusal(good, gptq_config(R"("bits": 8, "group_size": 32)")), "UnsupportedEncoding", qweight);
    {
        const Refusal r = refusal(good, gptq_config(R"("bits": 3, "group_size": 32)"));
        expect(r, "UnsupportedEncoding", qweight);
        BOOST_TEST(r.what.find("3-bit") != std::string::npos, r.what);
    }
    {  // scales for 5 groups where 128 / 32 makes 4
        const Refusal r = refusal(with(P + ".scales", {P + ".scales", DType::F16, {5, 16}, std::vector<std::uint8_t>(160, 0)}), config);
        expect(r, "ScaleShapeMismatch", P + ".scales");
        BOOST_TEST(r.what.find("[5,16]") != std::string::npos, r.what);
        BOOST_TEST(r.what.find(qweight + " I32 [16,16]") != std::string::npos, r.what);
        BOOST_TEST(r.what.find("[4,16]") != std::string::npos, r.what);
    }
    expect(refusal(with(P + ".qzeros", {P + ".qzeros", DType::I32, {4, 1}, zeros_bytes(4)}), gptq_config(64, false, Zeros::v2)),
           "ScaleShapeMismatch", P + ".scales");  // group 64 needs 2 rows of scales
    expect(refusal(with(P + ".qzeros", {P + ".qzeros", DType::I32, {4, 3}, zeros_bytes(12)}), config), "ScaleShapeMismatch",
           P + ".qzeros");
    expect(refusal(with(P + ".g_idx", {P + ".g_idx", DType::I32, {120}, zeros_bytes(120)}), config), "ShapeMismatch", P + ".g_idx");
    expect(refusal(with(qweight, {qweight, DType::I32, {16, 12}, zeros_bytes(192)}), config), "ShapeMismatch", qweight);
    expect(refusal(with(qweight, {qweight, DType::F32, {16, 16}, zeros_bytes(256)}), config), "UnsupportedDtype", qweight);
    expect(refusal(with(P + ".scales", {P + ".scales", DType::I16, {4, 16}, std::vector<std::uint8_t>(128, 0)}), config),
           "UnsupportedDtype", P + ".scales");
    expect(refusal(with(P + ".qzeros", {}), config), "MissingZeros", qweight);
    expect(refusal(with(P + ".scales", {}), config), "MissingScale", qweight);
    expect(refusal(with(P + ".g_idx", {}), gptq_config(32, true, Zeros::v2)), "MissingGroupIndex", qweight);
    expect(refusal(with("", {P + ".weight", DType::BF16, {16, 128}, std::vector<std::uint8_t>(4096, 0)}), config),
           "AmbiguousEncoding", P + ".weight");

    // AWQ keeps qweight/qzeros/scales too, packed along N in another order: never read as GPTQ.
    // The awq encoding takes them, and these GPTQ shapes do not fit its layout.
    expect(refusal(good, R"({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm"}})"),
           "ScaleShapeMismatch", P + ".scales");
    {
        const Refusal r = refusal(good, "{}");
        expect(r, "MissingConfig", qweight);
        BOOST_TEST(r.hint.find("quantize_config.json") == std::string::npos, r.hint);
    }
    {  // an old AutoGPTQ export: the side file is named in the hint, never read
        const Refusal r = refusal(good, R"({"model_type": "mixtral"})", [](TempDir& dir) {
            write_text(dir / "quantize_config.json", R"({"bits": 4, "group_size": 32, "desc_act": false, "sym": true})");
        });
        expect(r, "MissingConfig", qweight);
        BOOST_TEST(r.hint.find("quantize_config.json") != std::string::npos, r.hint);
    }
    expect(refusal(good, gptq_config(R"("bits": 4, "desc_act": false)")), "MissingGroupSize", qweight);
    expect(refusal(good, gptq_config(R"("bits": 4, "group_size": 0)")), "InvalidConfig", qweight);
    expect(refusal(good, gptq_config(R"("group_size": 32)")), "MissingConfig", qweight);
    expect(refusal(good, gptq_config(R"("bits": 4, "group_size": 32, "checkpoint_format": "marlin")")), "UnsupportedEncoding",
           qweight);
    expect(refusal(good, gptq_config(R"("bits": 4, "group_size": 32, "checkpoint_format": "gptq", "format": "gptq_v2")")),
           "InvalidConfig", qweight);
    expect(refusal(good, gptq_config(R"("bits": 4, "group_size": 32, "pack_dtype": "int16")")), "UnsupportedEncoding", qweight);
    expect(refusal(good, gptq_config(R"("bits": 4, "group_size": 32, "dynamic": {".*down_proj.*": {"bits": 8}})")),
           "UnsupportedEncoding", qweight);
    expect(refusal(good, R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})"),
           "UnsupportedEncoding", qweight);
}

BOOST_AUTO_TEST_CASE(only_the_four_gptq_suffixes_are_claimed) {
    TempDir dir;
    GptqLinear l = random_linear(64, 8, 32, false, Zeros::v2, 21);
    const auto scales = store_scales(l, DType::F16, 22);
    auto tensors = gptq_tensors(l, Zeros::v2, DType::F16, scales, true);
    tensors.push_back({"norm.scales", DType::F32, {8}, std::vector<std::uint8_t>(32, 0)});     // 1-D: not a GPTQ scale
    tensors.push_back({"other.g_idx", DType::I64, {8}, std::vector<std::uint8_t>(64, 0)});     // not I32: not a group index
    Checkpoint c = write_gptq(dir, tensors, gptq_config(32, false, Zeros::v2));
    BOOST_TEST(c.find_weight("norm.weight") == nullptr);
    BOOST_TEST(c.find_weight("other.weight") == nullptr);
    BOOST_TEST(c.find_weight(P + ".weight") != nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
