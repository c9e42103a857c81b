// The awq encoding plugin: AutoAWQ GEMM words packed here from AutoAWQ's documented layout
// (qweight [K, N/8] and qzeros [G, N/8], nibble p of a word holding column 8j + [0,2,4,6,1,3,5,7][p];
// scales [G, N]; w = (q - z) * s), decoded through Checkpoint::weight(): every element against
// the formula in F32 and BF16, windows equal to slices of a full decode, a ragged last group,
// and the refusals.

#include <moequant/checkpoint.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>

#include "encoding_checkpoint.hpp"
#include "reference_numerics.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <functional>
#include <random>

using namespace moequant;
using namespace moequant::test;

namespace {

const std::string P = "model.layers.1.mlp.experts.3.up_proj";

// AutoAWQ's pack order: the output column held by nibble p of a word (awq/modules/linear/gemm.py).
constexpr int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

struct AwqLinear {
    std::int64_t k = 0, n = 0, group = 0, groups = 0;
    std::vector<std::uint8_t> codes;  // q[k][n], [K, N]
    std::vector<std::uint8_t> zeros;  // z[g][n], [G, N]
    std::vector<float> scales;        // s[g][n] as stored (F16 values), [G, N]

    float value(std::int64_t row, std::int64_t col) const {
        const auto at = static_cast<std::size_t>((col / group) * n + row);
        const int q = codes[static_cast<std::size_t>(col * n + row)];
        return scales[at] * static_cast<float>(q - zeros[at]);
    }
};

AwqLinear random_linear(std::int64_t k, std::int64_t n, std::int64_t group, std::uint32_t seed) {
    std::mt19937 rng(seed);
    AwqLinear l{k, n, group, (k + group - 1) / group, {}, {}, {}};
    l.codes.resize(static_cast<std::size_t>(k * n));
    for (auto& c : l.codes) c = static_cast<std::uint8_t>(rng() % 16);
    l.zeros.resize(static_cast<std::size_t>(l.groups * n));
    for (auto& z : l.zeros) z = static_cast<std::uint8_t>(rng() % 16);
    l.scales.resize(l.zeros.size());
    for (auto& s : l.scales) s = f16_value(static_cast<std::uint16_t>(((4 + rng() % 8) << 10) | (rng() & 1023)));
    return l;
}

// Rows of `values` [rows, N] packed eight columns a word in AWQ's order.
std::vector<std::uint8_t> pack_rows(const std::vector<std::uint8_t>& values, std::int64_t rows, std::int64_t n) {
    std::vector<std::uint32_t> words(static_cast<std::size_t>(rows * n / 8), 0);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < n / 8; ++j)
            for (int p = 0; p < 8; ++p)
                words[static_cast<std::size_t>(r * (n / 8) + j)] |=
                    std::uint32_t{values[static_cast<std::size_t>(r * n + 8 * j + order[p])]} << (4 * p);
    return bytes_of(words);
}

std::vector<StoredTensor> awq_tensors(const AwqLinear& l) {
    std::vector<std::uint16_t> half;
    for (float s : l.scales) half.push_back(f32_to_f16(s));
    return {{P + ".qweight", DType::I32, {l.k, l.n / 8}, pack_rows(l.codes, l.k, l.n)},
            {P + ".qzeros", DType::I32, {l.groups, l.n / 8}, pack_rows(l.zeros, l.groups, l.n)},
            {P + ".scales", DType::F16, {l.groups, l.n}, bytes_of(half)}};
}

std::string awq_config(const std::string& members) { return R"({"quantization_config": {"quant_method": "awq", )" + members + "}}"; }
const std::string transformers_config = awq_config(R"("bits": 4, "group_size": 32, "zero_point": true, "version": "gemm")");
const std::string autoawq_config = awq_config(R"("w_bit": 4, "q_group_size": 32, "zero_point": true, "version": "GEMM")");

}  // namespace

BOOST_AUTO_TEST_SUITE(awq_encoding)

BOOST_AUTO_TEST_CASE(every_element_decodes_by_the_formula) {
    for (const std::string& config : {transformers_config, autoawq_config}) {
        const AwqLinear l = random_linear(96, 64, 32, 1);
        TempDir dir;
        Checkpoint c = write_checkpoint(dir, awq_tensors(l), config);
        const EncodedWeight& w = c.weight(P + ".weight");
        BOOST_TEST(w.encoding == "awq");
        BOOST_TEST(w.input_type == "awq");
        BOOST_TEST((w.shape == Shape{64, 96}));
        BOOST_TEST(w.summary == "AWQ INT4 (GEMM), group 32, F16 scales, zero points");
        for (const char* part : {".qweight", ".qzeros", ".scales"}) BOOST_TEST(c.weight_holding(P + part) == &w);
        const auto bf16 = bf16_values(decode_matrix(c, w));
        const auto f32 = f32_values(decode_matrix(c, w, 0, DecodeTarget::f32));
        for (std::int64_t n = 0; n < l.n; ++n)
            for (std::int64_t k = 0; k < l.k; ++k) {
                const auto i = static_cast<std::size_t>(n * l.k + k);
                if (f32[i] != l.value(n, k)) BOOST_FAIL("F32 differs at " << n << "," << k << ": " << f32[i] << " vs " << l.value(n, k));
                if (bf16[i] != bf16_round(l.value(n, k))) BOOST_FAIL("BF16 differs at " << n << "," << k);
            }
    }
}

BOOST_AUTO_TEST_CASE(windows_are_slices_of_the_full_decode_and_the_last_group_may_be_short) {
    const AwqLinear l = random_linear(80, 32, 32, 2);  // groups of 32, 32 and 16 input features
    TempDir dir;
    Checkpoint c = write_checkpoint(dir, awq_tensors(l), transformers_config);
    const EncodedWeight& w = c.weight(P + ".weight");
    const auto f32 = f32_values(decode_matrix(c, w, 0, DecodeTarget::f32));
    BOOST_TEST(f32[static_cast<std::size_t>(5 * 80 + 79)] == l.value(5, 79));
    for (DecodeTarget target : {DecodeTarget::bf16, DecodeTarget::f32}) {
        const Tensor full = decode_matrix(c, w, 0, target);
        check_window_against(full, c, w, {.row_begin = 3, .row_end = 29, .row_step = 3, .col_begin = 17, .col_end = 70}, target);
        check_window_against(full, c, w, {.row_begin = 0, .row_end = 32, .row_step = 1, .col_begin = 64, .col_end = 80}, target);
    }
}

BOOST_AUTO_TEST_CASE(refusals_name_the_tensor_and_the_rule) {
    const AwqLinear l = random_linear(64, 16, 32, 3);
    const auto good = awq_tensors(l);
    auto with = [&](const std::string& name, const StoredTensor& replacement) { return with_replaced(good, name, replacement); };
    auto expect = [&](const std::vector<StoredTensor>& tensors, const std::string& config, const std::string& code,
                      const std::string& tensor, const std::string& text = {}) {
        TempDir dir;
        Checkpoint c = write_checkpoint(dir, tensors, config);
        try {
            c.weight(P + ".weight");
            BOOST_ERROR("not refused: " << code);
        } catch (const Error& e) {
            BOOST_TEST((e.kind() == ErrorKind::input), e.what());
            BOOST_TEST(e.code() == code, e.what());
            BOOST_TEST(e.context().tensor == tensor, e.what());
            if (!text.empty()) BOOST_TEST(contains(e.what(), text), e.what());
        }
    };
    const std::string qweight = P + ".qweight";
    expect(good, awq_config(R"("bits": 8, "group_size": 32)"), "UnsupportedEncoding", qweight, "8-bit AWQ");
    expect(good, awq_config(R"("bits": 4, "group_size": 32, "version": "gemv")"), "UnsupportedEncoding", qweight, "'gemv' packing");
    expect(good, awq_config(R"("bits": 4, "group_size": 32, "zero_point": false)"), "UnsupportedEncoding", qweight, "without zero points");
    expect(good, awq_config(R"("bits": 4)"), "MissingGroupSize", qweight);
    expect(good, awq_config(R"("bits": 4, "group_size": 0)"), "InvalidConfig", qweight);
    expect(good, awq_config(R"("group_size": 32)"), "MissingConfig", qweight);
    expect(with(P + ".scales", {P + ".scales", DType::F16, {3, 16}, std::vector<std::uint8_t>(96, 0)}), transformers_config,
           "ScaleShapeMismatch", P + ".scales", "[2,16]");
    expect(with(P + ".qzeros", {P + ".qzeros", DType::I32, {2, 3}, std::vector<std::uint8_t>(24, 0)}), transformers_config,
           "ScaleShapeMismatch", P + ".qzeros");
    expect(with(P + ".qzeros", {}), transformers_config, "MissingZeros", qweight);
    expect(with(P + ".scales", {}), transformers_config, "MissingScale", qweight);
    expect(with(P + ".scales", {P + ".scales", DType::I16, {2, 16}, std::vector<std::uint8_t>(64, 0)}), transformers_config,
           "UnsupportedDtype", P + ".scales");
    expect(with("", {P + ".weight", DType::BF16, {16, 64}, std::vector<std::uint8_t>(2048, 0)}), transformers_config,
           "AmbiguousEncoding", P + ".weight");
}

BOOST_AUTO_TEST_SUITE_END()
