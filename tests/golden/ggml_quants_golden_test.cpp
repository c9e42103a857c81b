// moequant's GGUF row codecs against ggml's own reference code (tests/golden/data/ggml-quants:
// ggml_quantize_chunk() with and without an importance matrix, and the type's to_float, from
// libggml-base at the commit tests/golden/reference/ggml_quants/README.md pins). Every row's
// bytes and every dequantized float must be identical.

#include "built_plugin.hpp"
#include "ggml_types.hpp"
#include "test_support.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <moequant/cpu_isa.hpp>
#include <moequant/error.hpp>

#include <cctype>
#include <cstring>
#include <span>
#include <vector>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

const fs::path vectors = fs::path(MOEQUANT_SOURCE_DIR) / "tests/golden/data/ggml-quants";

std::vector<float> floats(const fs::path& file) {
    const std::vector<std::uint8_t> bytes = read_bytes(file);
    std::vector<float> out(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
    return out;
}

// The first byte where two rows differ, or -1.
std::int64_t first_difference(const std::uint8_t* a, const std::uint8_t* b, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
        if (a[i] != b[i]) return i;
    return -1;
}

struct Vectors {
    std::int64_t rows = 0, cols = 0;
    std::vector<float> input, importance;
    std::vector<std::string> types;
};

Vectors load() {
    Vectors v;
    const auto cases = json::parse(read_text(vectors / "cases.json")).as_object();
    v.rows = cases.at("rows").to_number<std::int64_t>();
    v.cols = cases.at("cols").to_number<std::int64_t>();
    v.input = floats(vectors / "input.f32");
    v.importance = floats(vectors / "imatrix.f32");
    for (const auto& t : cases.at("types").as_array()) {
        const auto& o = t.as_object();
        const std::string name(o.at("type").as_string());
        const auto* type = ggml_quants::ggml_type_named(name);
        BOOST_REQUIRE_MESSAGE(type, "no codec for " << name);
        BOOST_TEST(type->id == o.at("id").to_number<int>(), name);
        BOOST_TEST(type->block == o.at("block").to_number<int>(), name);
        BOOST_TEST(type->block_bytes == o.at("block_bytes").to_number<int>(), name);
        v.types.push_back(name);
    }
    return v;
}

// Quantizes every row with or without the importance matrix and compares with ggml's bytes.
void check_quantized(const Vectors& v, const ggml_quants::GgmlType& type, bool with_importance) {
    const std::vector<std::uint8_t> expected =
        read_bytes(vectors / (std::string(type.name) + (with_importance ? ".imatrix.q" : ".q")));
    const std::int64_t row_bytes = type.row_bytes(v.cols);
    BOOST_REQUIRE_EQUAL(static_cast<std::int64_t>(expected.size()), v.rows * row_bytes);
    std::vector<std::uint8_t> row(static_cast<std::size_t>(row_bytes));
    for (std::int64_t r = 0; r < v.rows; ++r) {
        std::fill(row.begin(), row.end(), std::uint8_t{0xA5});  // every byte must be written
        type.quantize(v.input.data() + r * v.cols, row.data(), v.cols, with_importance ? v.importance.data() : nullptr);
        const std::int64_t at = first_difference(row.data(), expected.data() + r * row_bytes, row_bytes);
        BOOST_TEST(at == -1, type.name << (with_importance ? " with imatrix" : "") << ": row " << r << " differs at byte " << at
                                       << " (block " << at / type.block_bytes << ", offset " << at % type.block_bytes << ")");
    }
}

void check_dequantized(const Vectors& v, const ggml_quants::GgmlType& type) {
    const std::vector<std::uint8_t> blocks = read_bytes(vectors / (std::string(type.name) + ".q"));
    const std::vector<float> expected = floats(vectors / (std::string(type.name) + ".f32"));
    std::vector<float> row(static_cast<std::size_t>(v.cols));
    for (std::int64_t r = 0; r < v.rows; ++r) {
        type.dequantize(blocks.data() + r * type.row_bytes(v.cols), row.data(), v.cols);
        const std::int64_t at = first_difference(reinterpret_cast<const std::uint8_t*>(row.data()),
                                                 reinterpret_cast<const std::uint8_t*>(expected.data() + r * v.cols), v.cols * 4);
        BOOST_TEST(at == -1, type.name << ": dequantized row " << r << " differs at value " << at / 4);
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ggml_quants_golden)

// Under every ISA this CPU has (the K-quants have vector paths).
BOOST_AUTO_TEST_CASE(every_type_quantizes_like_ggml_byte_for_byte) {
    const Vectors v = load();
    BOOST_TEST(v.types.size() == ggml_quants::ggml_types().size());
    const Isa before = active_isa();
    for (Isa isa : available_isas()) {
        set_isa_limit(isa);
        BOOST_TEST_CONTEXT("ISA " << isa_name(isa)) {
            for (const auto& name : v.types) {
                const auto& type = *ggml_quants::ggml_type_named(name);
                check_quantized(v, type, false);
                check_quantized(v, type, true);
            }
        }
    }
    set_isa_limit(before);
}

BOOST_AUTO_TEST_CASE(every_type_dequantizes_like_ggml_bit_for_bit) {
    const Vectors v = load();
    for (const auto& name : v.types) check_dequantized(v, *ggml_quants::ggml_type_named(name));
}

// The plugin as the host loads it: each gguf-<type> quantizer turns the [rows, cols] matrix into
// ggml's rows (one U8 part) and reads them back by ggml's arithmetic, from F32 and from BF16.
BOOST_AUTO_TEST_CASE(the_plugin_quantizers_write_ggml_rows) {
    const Vectors v = load();
    BuiltPlugin plugin("moequant-quantizer-ggml_quants");
    for (const auto& name : v.types) {
        const auto& type = *ggml_quants::ggml_type_named(name);
        std::string id = "gguf-" + name;
        for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const Quantizer& quantizer = plugin.quantizer(id);
        BOOST_TEST(quantizer.facts().get_string("gguf.type", "") == name);
        BOOST_TEST(quantizer.facts().get_int("gguf.type_id", -1) == type.id);
        const TensorView input{DType::F32, {v.rows, v.cols}, std::as_bytes(std::span<const float>(v.input))};
        const QuantizedTensor q = quantizer.quantize(input);
        const std::vector<std::uint8_t> expected = read_bytes(vectors / (name + ".q"));
        const Tensor* rows = q.part("weight");
        BOOST_REQUIRE(rows);
        BOOST_TEST((rows->dtype() == DType::U8 && rows->shape() == Shape{v.rows, type.row_bytes(v.cols)}));
        BOOST_TEST(std::memcmp(rows->data(), expected.data(), expected.size()) == 0, name);
        const Tensor back = quantizer.dequantize(q, {v.rows, v.cols});
        BOOST_TEST(std::memcmp(back.data(), floats(vectors / (name + ".f32")).data(), back.size_bytes()) == 0, name);
        // A row length off the block is refused, naming the rule.
        if (type.block > 1) BOOST_CHECK_THROW(quantizer.output_layout({2, type.block + 1}), Error);
    }
}

BOOST_AUTO_TEST_SUITE_END()
