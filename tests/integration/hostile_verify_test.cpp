// Issue 13, hostile outputs and names: verify fails a compressed-tensors output whose
// weight_shape, quantization_config (num_bits, strategy, group_size, actorder, type,
// symmetric) or ignore list contradict its stored parts; names that carry terminal controls are
// printed escaped by inspect and in error lines; rows so small that 1/scale overflows are
// written as kt-kernel writes them, with a warning from convert that verify repeats while
// passing. The source folder is never changed.

#include "checkpoint_rewrite.hpp"
#include "test_support.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/safetensors_reader.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <functional>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

// The lines of `text` that contain `part`.
std::size_t lines_with(const std::string& text, const std::string& part) {
    std::size_t n = 0, at = 0;
    while (at < text.size()) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        if (text.substr(at, end - at).find(part) != std::string::npos) ++n;
        at = end + 1;
    }
    return n;
}

const std::string module = "model.layers.0.mlp.experts.1.down_proj";

// A qwen3_moe source (per-expert BF16 experts) and its RTN W4A16 compressed-tensors output.
struct RtnOutput {
    TempDir dir;
    fs::path source = dir / "src";
    fs::path out = dir / "out";
    std::map<std::string, std::string> source_hashes;

    RtnOutput() {
        auto s = run_moequant({"synth", "--family", "qwen3_moe", "--layout", "per-expert", "--out", source.string()});
        BOOST_REQUIRE_MESSAGE(s.exit_code == 0, s.err);
        source_hashes = file_hashes(source);
        auto g = run_moequant({"gptq", "--model_id", source.string(), "--output_dir", out.string(), "--quant_method", "RTN",
                               "--quant_type", "W4A16", "--quiet"});
        BOOST_REQUIRE_MESSAGE(g.exit_code == 0, g.err);
    }

    CommandResult verify(const fs::path& converted) const {
        return run_moequant({"verify", "--source", source.string(), "--converted", converted.string(), "--quiet"});
    }

    // A copy of the output with config.json's quantization_config changed.
    fs::path with_config(const std::string& name, const std::function<void(json::object&)>& edit) const {
        const fs::path copy = dir / name;
        fs::copy(out, copy, fs::copy_options::recursive);
        auto config = json::parse(read_text(copy / "config.json")).as_object();
        edit(config["quantization_config"].as_object());
        write_text(copy / "config.json", json::serialize(config));
        return copy;
    }

    ~RtnOutput() { BOOST_TEST((file_hashes(source) == source_hashes)); }
};

json::object& weight_arguments(json::object& q) {
    return q["config_groups"].as_object()["group_0"].as_object()["weights"].as_object();
}

// The shape of a tensor of a sharded checkpoint.
Shape stored_shape(const fs::path& dir, const std::string& tensor) {
    const auto index = json::parse(read_text(dir / "model.safetensors.index.json")).as_object();
    return SafetensorsFile::open(dir / std::string(index.at("weight_map").at(tensor).as_string())).info(tensor).shape;
}

// The one stderr line of a failed command: "moequant: error: ...".
void check_one_error_line(const CommandResult& r, int exit_code, const std::string& code) {
    BOOST_TEST(r.exit_code == exit_code, r.out << r.err);
    BOOST_TEST(r.err.starts_with("moequant: error: "), r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    BOOST_TEST(contains(r.err, "(" + code + ")"), r.err);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hostile)
BOOST_AUTO_TEST_SUITE(verify_and_terminal)

// vLLM and SGLang take the matrix shape from weight_shape: one that is not the source's fails.
BOOST_AUTO_TEST_CASE(weight_shape_contradicting_the_source_fails) {
    RtnOutput o;
    BOOST_REQUIRE(o.verify(o.out).exit_code == 0);
    const fs::path changed = o.dir / "shape";
    fs::copy(o.out, changed, fs::copy_options::recursive);
    std::int64_t rows = 0, cols = 0;
    edit_tensor_bytes(changed, module + ".weight_shape", [&](std::uint8_t* p, std::size_t n) {
        BOOST_REQUIRE(n == 16u);
        std::memcpy(&rows, p, 8);
        std::memcpy(&cols, p + 8, 8);
        const std::int64_t wider = 2 * cols;  // the packed sizes still fit the source
        std::memcpy(p + 8, &wider, 8);
    });
    auto r = o.verify(changed);
    BOOST_TEST(r.exit_code == 6, r.out << r.err);
    const std::string expected = "weight_shape holds " + shape_to_string(Shape{rows, 2 * cols}) +
                                 ", but the source matrix is " + shape_to_string(Shape{rows, cols});
    BOOST_TEST(lines_with(r.out, expected) == 1u, r.out);
    BOOST_TEST(contains(r.out, module + ".weight_shape"), r.out);
    BOOST_TEST(contains(r.out, "FAILED: 47 of 48 parts"), r.out);
    BOOST_TEST(r.err.empty(), r.err);  // a verification failure is the report, not an error line
}

// group_size, strategy and num_bits are what the stored parts' sizes must follow.
BOOST_AUTO_TEST_CASE(config_scheme_contradicting_the_stored_sizes_fails) {
    RtnOutput o;
    const Shape scale = stored_shape(o.out, module + ".weight_scale");
    const Shape packed = stored_shape(o.out, module + ".weight_packed");
    const auto shape_text = [](std::int64_t a, std::int64_t b) { return shape_to_string(Shape{a, b}); };

    auto group = o.verify(o.with_config("group64", [](json::object& q) { weight_arguments(q)["group_size"] = 64; }));
    BOOST_TEST(group.exit_code == 6, group.out << group.err);
    BOOST_TEST(contains(group.out, "'weight_scale' has shape " + shape_to_string(scale) + ", expected " +
                                       shape_text(scale[0], scale[1] * 2) + " (the layout of rtn with the output's "),
               group.out);
    BOOST_TEST(contains(group.out, "group_size 64"), group.out);
    BOOST_TEST(contains(group.out, "FAILED: 0 of 48 parts"), group.out);

    auto channel = o.verify(o.with_config("channel", [](json::object& q) {
        weight_arguments(q)["strategy"] = "channel";
        weight_arguments(q)["group_size"] = nullptr;
    }));
    BOOST_TEST(channel.exit_code == 6, channel.out << channel.err);
    BOOST_TEST(contains(channel.out, "'weight_scale' has shape " + shape_to_string(scale) + ", expected " +
                                         shape_text(scale[0], 1)),
               channel.out);
    BOOST_TEST(contains(channel.out, "strategy channel"), channel.out);

    auto bits = o.verify(o.with_config("bits8", [](json::object& q) { weight_arguments(q)["num_bits"] = 8; }));
    BOOST_TEST(bits.exit_code == 6, bits.out << bits.err);
    BOOST_TEST(contains(bits.out, "'weight_packed' has shape " + shape_to_string(packed) + ", expected " +
                                      shape_text(packed[0], packed[1] * 2)),
               bits.out);
    BOOST_TEST(contains(bits.out, "num_bits 8"), bits.out);

    // One part stored with another group size than the config's (and its neighbours').
    const fs::path odd = o.dir / "odd_part";
    rewrite(o.out, odd, [&](const std::string& name, std::optional<Replacement>& r) {
        if (name == module + ".weight_scale")
            r = Replacement{{name, DType::BF16, {scale[0], scale[1] * 2}},
                            std::vector<std::uint8_t>(static_cast<std::size_t>(scale[0] * scale[1] * 4), 0x3c)};
        return true;
    });
    auto part = run_moequant({"verify", "--source", o.source.string(), "--converted", odd.string(), "--quiet",
                              "--quantizer", "rtn"});  // rewrite() drops the shards' moequant metadata
    BOOST_TEST(part.exit_code == 6, part.out << part.err);
    BOOST_TEST(lines_with(part.out, module + ".weight_scale, ") == 1u, part.out);
    BOOST_TEST(contains(part.out, "'weight_scale' has shape " + shape_text(scale[0], scale[1] * 2) + ", expected " +
                                      shape_to_string(scale) + " (the layout of rtn with the output's num_bits 4, "
                                      "strategy group, group_size 128)"),
               part.out);
    BOOST_TEST(contains(part.out, "FAILED: 47 of 48 parts"), part.out);

    // A strategy and group_size that do not go together are no scheme at all.
    auto mixed = o.verify(o.with_config("mixed", [](json::object& q) { weight_arguments(q)["strategy"] = "channel"; }));
    check_one_error_line(mixed, 3, "UnsupportedFormat");
    BOOST_TEST(contains(mixed.err, "strategy channel has no group_size, got 128"), mixed.err);
}

// What the stored parts cannot be: float or asymmetric codes, or g_idx-less with actorder group.
BOOST_AUTO_TEST_CASE(type_symmetric_and_actorder_contradicting_the_parts_are_refused) {
    RtnOutput o;
    auto type = o.verify(o.with_config("float", [](json::object& q) { weight_arguments(q)["type"] = "float"; }));
    check_one_error_line(type, 3, "UnsupportedFormat");
    BOOST_TEST(contains(type.err, "type is \"float\", but pack-quantized parts hold int codes"), type.err);

    auto asym = o.verify(o.with_config("asym", [](json::object& q) { weight_arguments(q)["symmetric"] = false; }));
    check_one_error_line(asym, 3, "UnsupportedFormat");
    BOOST_TEST(contains(asym.err, "symmetric is false, but the parts carry no weight_zero_point"), asym.err);

    auto order = o.verify(o.with_config("group_order", [](json::object& q) { weight_arguments(q)["actorder"] = "group"; }));
    check_one_error_line(order, 3, "ConfigContradictsParts");
    BOOST_TEST(contains(order.err, "quantization_config.actorder is \"group\", but expert "
                                   "'model.layers.0.mlp.experts.0.gate_proj' has no weight_g_idx"),
               order.err);

    // And the other way: a weight_g_idx that actorder says is not there.
    auto gptq = run_moequant({"synth", "--family", "qwen3_moe", "--layout", "per-expert", "--out", (o.dir / "s2").string(),
                              "--activations", (o.dir / "a.safetensors").string(), "--samples", "4",
                              "--sample-tokens", "32"});
    BOOST_REQUIRE_MESSAGE(gptq.exit_code == 0, gptq.err);
    const fs::path grouped = o.dir / "grouped";
    auto g = run_moequant({"gptq", "--model_id", (o.dir / "s2").string(), "--output_dir", grouped.string(), "--actorder",
                           "group", "--calibration-activations", (o.dir / "a.safetensors").string(), "--quiet"});
    BOOST_REQUIRE_MESSAGE(g.exit_code == 0, g.err);
    auto config = json::parse(read_text(grouped / "config.json")).as_object();
    weight_arguments(config["quantization_config"].as_object())["actorder"] = nullptr;
    write_text(grouped / "config.json", json::serialize(config));
    auto stray = run_moequant({"verify", "--source", (o.dir / "s2").string(), "--converted", grouped.string(), "--quiet"});
    check_one_error_line(stray, 3, "ConfigContradictsParts");
    BOOST_TEST(contains(stray.err, "stores a weight_g_idx"), stray.err);
}

// vLLM loads a module `ignore` lists as a plain weight: a quantized one there is refused, by
// name or by pattern.
BOOST_AUTO_TEST_CASE(a_quantized_expert_listed_in_ignore_is_refused) {
    RtnOutput o;
    auto named = o.verify(o.with_config("named", [](json::object& q) { q["ignore"].as_array().emplace_back(module); }));
    check_one_error_line(named, 3, "IgnoredButQuantized");
    BOOST_TEST(contains(named.err,
                        "quantization_config.ignore lists expert '" + module + "', but the output stores it quantized"),
               named.err);
    BOOST_TEST(contains(named.err, "tensor '" + module + ".weight_packed'"), named.err);

    auto pattern = o.verify(o.with_config("pattern", [](json::object& q) {
        q["ignore"].as_array().emplace_back("re:.*layers\\.1\\.mlp\\.experts\\..*");
    }));
    check_one_error_line(pattern, 3, "IgnoredButQuantized");
    BOOST_TEST(contains(pattern.err, "expert 'model.layers.1.mlp.experts.0.gate_proj'"), pattern.err);

    // A pattern that backtracks without end is refused, not matched for ever.
    auto endless = o.verify(
        o.with_config("endless", [](json::object& q) { q["ignore"].as_array().emplace_back("re:(\\w|\\w|.)*Z"); }));
    check_one_error_line(endless, 3, "UnsupportedFormat");
    BOOST_TEST(contains(endless.err, "pattern 're:(\\w|\\w|.)*Z' is too complex to match"), endless.err);
}

// A checkpoint's tensor name can hold ESC sequences, CR, LF and C1 controls: inspect and error
// lines print it escaped, so it can neither clear the screen nor fake a line of its own.
BOOST_AUTO_TEST_CASE(control_characters_in_names_are_printed_escaped) {
    TempDir dir;
    const std::string evil = "w\x1b[2J\x1b[H\rPASSED: 48 of 48\n\xc2\x9b" "31m\\";
    const std::string escaped = "w\\x1b[2J\\x1b[H\\x0dPASSED: 48 of 48\\x0a\\u{009b}31m\\\\";
    // One BF16 [elements] tensor of that name over 4 data bytes.
    const auto file = [&](const std::string& name, std::int64_t elements) {
        const json::object header{
            {evil, json::object{{"dtype", "BF16"}, {"shape", json::array{elements}}, {"data_offsets", json::array{0, 4}}}}};
        write_bytes(dir / name, safetensors_bytes(json::serialize(header), std::vector<std::uint8_t>(4, 0)));
        return dir / name;
    };
    const fs::path good = file("good.safetensors", 2), short_data = file("short.safetensors", 3);
    const auto hashes = file_hashes(dir.path());

    auto listed = run_moequant({"inspect", good.string(), "--tensors", "--headers-only"});
    BOOST_TEST(listed.exit_code == 0, listed.err);
    BOOST_TEST(lines_with(listed.out, escaped) == 1u, listed.out);
    for (const char c : {'\x1b', '\r'}) BOOST_TEST(listed.out.find(c) == std::string::npos);
    BOOST_TEST(!contains(listed.out, "\xc2\x9b"));
    BOOST_TEST(lines_with(listed.out, "PASSED") == 1u, listed.out);  // only inside the escaped name

    auto refused = run_moequant({"inspect", short_data.string(), "--tensors"});
    check_one_error_line(refused, 3, "TensorInvalidInfo");
    BOOST_TEST(contains(refused.err, "tensor '" + escaped + "'"), refused.err);
    for (const char c : {'\x1b', '\r'}) BOOST_TEST(refused.err.find(c) == std::string::npos);
    BOOST_TEST(refused.out.empty(), refused.out);
    BOOST_TEST((file_hashes(dir.path()) == hashes));
}

// max |w| below about 3.3e-37 makes 1/scale overflow: convert writes the saturated codes
// kt-kernel would (the bytes are the golden tests'), warns naming the rows, and verify agrees.
BOOST_AUTO_TEST_CASE(tiny_rows_are_written_with_a_warning_and_verify_agrees) {
    TempDir dir;
    auto s = run_moequant({"synth", "--family", "qwen3_moe", "--layout", "per-expert", "--out", (dir / "src").string()});
    BOOST_REQUIRE_MESSAGE(s.exit_code == 0, s.err);
    const std::string tensor = "model.layers.0.mlp.experts.1.gate_proj.weight";
    fs::copy(dir / "src", dir / "tiny", fs::copy_options::recursive);
    const std::int64_t cols = stored_shape(dir / "tiny", tensor)[1];
    // Rows 3 and 200 (a row of the second threadpool part): alternating signs, |w| ~ 1e-38.
    edit_tensor_bytes(dir / "tiny", tensor, [&](std::uint8_t* p, std::size_t) {
        for (std::int64_t row : {3, 200})
            for (std::int64_t c = 0; c < cols; ++c) {
                const std::uint16_t v = f32_to_bf16((c % 2 ? -1.0f : 1.0f) * 1e-38f * static_cast<float>(1 + c % 7));
                std::memcpy(p + 2 * (row * cols + c), &v, 2);
            }
    });
    const auto hashes = file_hashes(dir / "tiny");
    for (const char* method : {"int4", "int8"}) {
        BOOST_TEST_CONTEXT(method) {
            const fs::path out = dir / method;
            auto c = run_moequant({"convert", "-i", (dir / "tiny").string(), "-o", out.string(), "--quant-method", method,
                                   "--quiet"});
            BOOST_TEST(c.exit_code == 0, c.err);
            const std::string warning = "moequant: warning: 2 row(s) have max |w| below about 3.3e-37, where 1/scale "
                                        "overflows: their codes are saturated, as the runtime's own quantization makes them (" +
                                        tensor + " row 3, " + tensor + " row 200)\n";
            BOOST_TEST(c.err == warning);
            auto v = run_moequant({"verify", "--source", (dir / "tiny").string(), "--converted", out.string(), "--quiet"});
            BOOST_TEST(v.exit_code == 0, v.out << v.err);
            BOOST_TEST(v.err == warning);
            BOOST_TEST(contains(v.out, "PASSED"), v.out);
        }
    }
    // RTN divides by its scale instead of multiplying by 1/scale: nothing saturates, no warning.
    auto rtn = run_moequant({"gptq", "--model_id", (dir / "tiny").string(), "--output_dir", (dir / "rtn").string(),
                             "--quant_method", "RTN", "--quiet"});
    BOOST_TEST(rtn.exit_code == 0, rtn.err);
    BOOST_TEST(rtn.err.empty(), rtn.err);
    auto v = run_moequant({"verify", "--source", (dir / "tiny").string(), "--converted", (dir / "rtn").string(), "--quiet"});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);
    BOOST_TEST(v.err.empty(), v.err);
    BOOST_TEST((file_hashes(dir / "tiny") == hashes));
}

BOOST_AUTO_TEST_SUITE_END()
BOOST_AUTO_TEST_SUITE_END()
