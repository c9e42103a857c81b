// The amx quantizers configured with backward_weights, loaded as the host loads them, against
// the backward weights kt-kernel's own SFT code writes (tests/golden/data/kt-amx-backward:
// convert_cpu_weights.py's AMXSFTMoEWrapper path, two NUMA parts; made by
// tests/golden/reference/kt_amx_backward/make_vectors.py). The inputs are not stored: they are
// drawn here by the generator that script documents.

#include "built_plugin.hpp"
#include "tensor_bytes.hpp"
#include "test_support.hpp"

#include <moequant/error.hpp>
#include <moequant/splitmix64.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

using namespace moequant;
using namespace moequant::test;

namespace {

// make_vectors.py's inputs: gate [E, I, H], up [E, I, H], down [E, H, I] as BF16 bits, drawn in
// that order, then the gate's zero column.
struct Layer {
    std::int64_t experts, hidden, intermediate;
    std::vector<std::uint16_t> gate, up, down;
};

Layer drawn_layer(const boost::json::object& doc) {
    Layer l{doc.at("experts").to_number<std::int64_t>(), doc.at("hidden_size").to_number<std::int64_t>(),
            doc.at("intermediate_size").to_number<std::int64_t>(), {}, {}, {}};
    SplitMix64 rng(doc.at("seed").to_number<std::uint64_t>());
    const auto count = static_cast<std::size_t>(l.experts * l.hidden * l.intermediate);
    for (auto* m : {&l.gate, &l.up, &l.down})
        for (std::size_t i = 0; i < count; ++i) {
            const std::uint64_t x = rng.next();
            m->push_back(static_cast<std::uint16_t>(((x >> 48) & 0x807F) | ((120 + ((x >> 40) & 7)) << 7)));
        }
    const std::int64_t zero = doc.at("zero_column").to_number<std::int64_t>();
    for (std::int64_t r = 0; r < l.experts * l.intermediate; ++r) l.gate[static_cast<std::size_t>(r * l.hidden + zero)] = 0;
    return l;
}

// Part `part` of `parts` of expert `e`'s matrix, as kt slices it: gate/up rows, down columns.
std::vector<std::uint16_t> part_of(const Layer& l, Projection p, std::int64_t e, int part, int parts) {
    const std::int64_t H = l.hidden, I = l.intermediate, each = I / parts;
    std::vector<std::uint16_t> out;
    if (p != Projection::down) {
        const auto& m = p == Projection::gate ? l.gate : l.up;
        const auto first = m.begin() + (e * I + part * each) * H;
        return {first, first + each * H};
    }
    for (std::int64_t r = 0; r < H; ++r) {
        const auto first = l.down.begin() + (e * H + r) * I + part * each;
        out.insert(out.end(), first, first + each);
    }
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(amx_backward_golden)

BOOST_AUTO_TEST_CASE(every_backward_file_matches_kt_kernel_byte_for_byte) {
    const fs::path vectors = fs::path(MOEQUANT_SOURCE_DIR) / "tests/golden/data/kt-amx-backward";
    BuiltPlugin plugin("moequant-quantizer-amx");
    const auto doc = boost::json::parse(read_text(vectors / "cases.json")).as_object();
    const Layer layer = drawn_layer(doc);
    const int parts = static_cast<int>(doc.at("parts").to_number<std::int64_t>());
    std::size_t matched = 0;
    for (const auto& value : doc.at("cases").as_array()) {
        const auto& c = value.as_object();
        const std::string method(c.at("method").as_string());
        const auto backward = plugin.quantizer(method == "INT8" ? "amx-int8" : "amx-int4").configure(Options{{"backward_weights", "true"}});
        BOOST_REQUIRE(backward);
        // What the quantizer makes of each part, by kt's file name: {P}_{proj}_bwd_{e}_{bytes}Byte_{quant|scale}_.kt
        std::map<std::string, std::vector<std::uint8_t>> made[2];
        for (std::int64_t e = 0; e < layer.experts; ++e)
            for (Projection p : expert_projections)
                for (int part = 0; part < parts; ++part) {
                    const auto matrix = part_of(layer, p, e, part, parts);
                    const std::int64_t rows = p == Projection::down ? layer.hidden : layer.intermediate / parts;
                    const std::int64_t cols = static_cast<std::int64_t>(matrix.size()) / rows;
                    const TensorView view{DType::BF16, {rows, cols}, std::as_bytes(std::span<const std::uint16_t>(matrix))};
                    const QuantizedTensor q = backward->quantize(view);
                    BOOST_TEST(backward->stored_problem(q, view).empty());  // verify's check of the backward parts
                    for (const auto& [name, kind] : {std::pair{"backward.weight", "quant"}, std::pair{"backward.scale", "scale"}}) {
                        const auto bytes = bytes_of(*q.part(name));
                        made[part][method + "_" + std::string(projection_name(p)) + "_bwd_" + std::to_string(e) + "_" +
                                   std::to_string(bytes.size()) + "Byte_" + kind + "_.kt"] = bytes;
                    }
                }
        for (const auto& f : c.at("files").as_array()) {
            const auto& file = f.as_object();
            const std::string kt_name(file.at("kt_name").as_string());
            const auto part = static_cast<std::size_t>(file.at("part").to_number<std::int64_t>());
            BOOST_TEST_CONTEXT(method << " part " << part << " " << kt_name) {
                BOOST_REQUIRE_MESSAGE(made[part].count(kt_name), "the quantizer makes no such file (name or size differs)");
                BOOST_TEST((made[part].at(kt_name) == read_bytes(vectors / std::string(file.at("file").as_string()))));
                made[part].erase(kt_name);
                ++matched;
            }
        }
        BOOST_TEST((made[0].empty() && made[1].empty()), "the quantizer makes files kt does not write");
    }
    BOOST_TEST(matched == 24u);  // INT8 and INT4, two parts, gate/up/down, quant and scale
}

// The option's layout: two more parts of the transposed shape, only when asked for; a part whose
// transpose the method cannot pack and a non-boolean value are refused by name.
BOOST_AUTO_TEST_CASE(the_option_adds_the_transposed_parts_or_names_what_stops_them) {
    BuiltPlugin plugin("moequant-quantizer-amx");
    const Quantizer& int4 = plugin.quantizer("amx-int4");
    BOOST_TEST(int4.output_layout({256, 128}).size() == 2u);
    const auto backward = int4.configure(Options{{"backward_weights", "true"}});
    BOOST_REQUIRE(backward);
    const auto layout = backward->output_layout({256, 128});
    BOOST_REQUIRE(layout.size() == 4u);
    BOOST_TEST(layout[2].name == "backward.weight");
    BOOST_TEST((layout[2].shape == Shape{128 * 256 / 2}));
    BOOST_TEST(layout[3].name == "backward.scale");
    BOOST_TEST((layout[3].shape == Shape{128}));
    BOOST_TEST(!int4.configure(Options{{"backward_weights", "false"}}));  // nothing to change
    try {
        backward->output_layout({32, 128});  // INT4 packs [32, 128], not its transpose [128, 32]
        BOOST_ERROR("the untransposable shape was not refused");
    } catch (const Error& e) {
        BOOST_TEST(e.code() == "UnpackableShape");
        BOOST_TEST(contains(e.what(), "the backward weights (the part transposed, [128, 32]) cannot be packed"), e.what());
    }
    try {
        int4.configure(Options{{"backward_weights", "maybe"}});
        BOOST_ERROR("a non-boolean value was taken");
    } catch (const Error& e) {
        BOOST_TEST((e.kind() == ErrorKind::usage), e.what());
        BOOST_TEST(contains(e.what(), "backward_weights"), e.what());
    }
}

BOOST_AUTO_TEST_SUITE_END()
