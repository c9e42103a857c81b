// `moequant gptq` end to end (the GPU path): for every family, synth (with recorded calibration
// activations) -> gptq (GPTQ and RTN, W4A16 and W8A16) -> verify passes; GPTQ's output error on
// its calibration data is below RTN's for every expert projection; config.json carries exactly
// the quantization_config structure of gptq-compressed-tensors.md §7 with an ignore list equal to
// the unquantized Linear modules actually written; FP8 is dequantized, MTP layers are not
// written; bad calibration input and unsupported requests fail with one clear line.

#include "test_support.hpp"

#include <moequant/safetensors_reader.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <set>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

struct Source {
    std::string family, dtype, layout;
};

const std::vector<Source> sources = {
    {"deepseek_v3", "fp8", "per-expert"}, {"kimi_k2", "fp8", "per-expert"}, {"qwen3_next", "bf16", "per-expert"},
    {"glm4_moe", "fp8", "per-expert"},    {"qwen3_moe", "bf16", "fused-bmm"}, {"mixtral", "bf16", "fused-linear"},
    {"mixtral", "bf16", "per-expert"},
};

void synth(const fs::path& out, const Source& s, const fs::path& activations) {
    auto r = run_moequant({"synth", "--family", s.family, "--dtype", s.dtype, "--layout", s.layout, "--out", out.string(),
                           "--activations", activations.string(), "--samples", "6", "--sample-tokens", "48"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
}

CommandResult run_gptq(const fs::path& in, const fs::path& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"gptq", "--model_id", in.string(), "--output_dir", out.string(), "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_moequant(args);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// §7's quantization_config for these settings, with the given ignore list.
json::value expected_config(int bits, const json::value& actorder, const json::array& ignore) {
    json::object weights{{"actorder", actorder},     {"block_structure", nullptr}, {"dynamic", false},
                         {"group_size", 128},        {"num_bits", bits},           {"observer", "memoryless_minmax"},
                         {"observer_kwargs", json::object()}, {"scale_dtype", nullptr}, {"strategy", "group"},
                         {"symmetric", true},        {"type", "int"},             {"zp_dtype", nullptr}};
    json::object group{{"format", "pack-quantized"}, {"input_activations", nullptr}, {"output_activations", nullptr},
                       {"targets", json::array{"Linear"}}, {"weights", std::move(weights)}};
    return json::object{{"config_groups", json::object{{"group_0", std::move(group)}}},
                        {"format", "pack-quantized"},
                        {"global_compression_ratio", nullptr},
                        {"ignore", ignore},
                        {"kv_cache_scheme", nullptr},
                        {"quant_method", "compressed-tensors"},
                        {"quantization_status", "compressed"},
                        {"sparsity_config", json::object()},
                        {"transform_config", json::object()},
                        {"version", "0.18.0"}};
}

struct WrittenTensor {
    DType dtype;
    Shape shape;
};

std::map<std::string, WrittenTensor> written_tensors(const fs::path& out) {
    std::map<std::string, WrittenTensor> tensors;
    for (const auto& e : fs::directory_iterator(out))
        if (e.path().extension() == ".safetensors") {
            SafetensorsFile f = SafetensorsFile::open(e.path());
            for (const auto& t : f.tensors()) tensors[t.name] = {t.dtype, t.shape};
        }
    return tensors;
}

// Every 2-D `.weight` the output stores is an unquantized Linear except the embeddings.
std::set<std::string> unquantized_linears(const std::map<std::string, WrittenTensor>& tensors) {
    std::set<std::string> modules;
    for (const auto& [name, t] : tensors)
        if (name.ends_with(".weight") && t.shape.size() == 2 && !contains(name, "embed_tokens"))
            modules.insert(name.substr(0, name.size() - 7));
    return modules;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gptq)

BOOST_AUTO_TEST_CASE(every_family_gptq_and_rtn_verify_and_gptq_beats_rtn) {
    for (const auto& s : sources) {
        BOOST_TEST_CONTEXT(s.family << " " << s.dtype << " " << s.layout) {
            TempDir dir;
            const fs::path activations = dir / "act.safetensors";
            synth(dir / "src", s, activations);
            for (const auto& [method, type] : {std::pair{"GPTQ", "W4A16"}, {"RTN", "W8A16"}}) {
                BOOST_TEST_CONTEXT(method << " " << type) {
                    const fs::path out = dir / (std::string(method) + type);
                    auto r = run_gptq(dir / "src", out, {"--quant_method", method, "--quant_type", type,
                                                     "--calibration-activations", activations.string()});
                    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
                    auto v = run_moequant({"verify", "--source", (dir / "src").string(), "--converted", out.string(), "--gemv",
                                           "--json", "--quiet", "--calibration-activations", activations.string()});
                    BOOST_TEST(v.exit_code == 0, v.out << v.err);
                    const auto report = json::parse(v.out).as_object();
                    BOOST_TEST(report.at("passed").as_bool());
                    BOOST_TEST(report.at("format").as_string() == "compressed-tensors");
                    BOOST_TEST(report.at("quantizer").as_string() == (std::string(method) == "GPTQ" ? "gptq" : "rtn"));
                    std::size_t parts = 0;
                    for (const auto& part : report.at("tensors").as_array()) {
                        const auto& c = part.as_object();
                        BOOST_REQUIRE(c.contains("output_error"));
                        ++parts;
                        if (std::string(method) == "GPTQ")  // every expert projection, on its calibration data
                            BOOST_TEST(c.at("output_error").as_double() < c.at("reference_output_error").as_double(),
                                       c.at("location").as_string());
                    }
                    BOOST_TEST(parts > 0u);

                    // config.json: exactly §7's structure; ignore = the Linear modules left unquantized.
                    const auto tensors = written_tensors(out);
                    const auto config = json::parse(read_text(out / "config.json")).as_object();
                    const json::array& ignore = config.at("quantization_config").at("ignore").as_array();
                    std::set<std::string> listed;
                    for (const auto& n : ignore) listed.insert(std::string(n.as_string()));
                    BOOST_TEST(listed.size() == ignore.size());
                    BOOST_TEST((listed == unquantized_linears(tensors)));
                    const json::value actorder = std::string(method) == "GPTQ" ? json::value("static") : json::value(nullptr);
                    BOOST_TEST(config.at("quantization_config") == expected_config(std::string(type) == "W4A16" ? 4 : 8, actorder, ignore));
                    // FP8 dequantized (no FP8 tensor, no block scale), MTP layers not written,
                    // experts stored per expert with the three pack-quantized parts.
                    std::size_t packed = 0;
                    for (const auto& [name, t] : tensors) {
                        BOOST_TEST((t.dtype != DType::F8_E4M3), name);
                        BOOST_TEST(!name.ends_with("_scale_inv"), name);
                        if (name.ends_with(".weight_packed")) {
                            ++packed;
                            const std::string module = name.substr(0, name.size() - 14);
                            BOOST_TEST(tensors.count(module + ".weight_scale"));
                            BOOST_TEST(tensors.count(module + ".weight_shape"));
                            BOOST_TEST(!tensors.count(module + ".weight"));
                            BOOST_TEST(contains(module, ".experts."));
                        }
                    }
                    BOOST_TEST(packed == parts);
                }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(w8a16_gptq_and_w4a16_rtn_and_actorder_group_verify) {
    TempDir dir;
    const fs::path activations = dir / "act.safetensors";
    synth(dir / "src", {"deepseek_v3", "bf16", "per-expert"}, activations);
    for (const auto& extra : std::vector<std::vector<std::string>>{
             {"--quant_type", "W8A16", "--calibration-activations", activations.string()},
             {"--quant_type", "W4A16", "--quant_method", "RTN"},
             {"--actorder", "group", "--calibration-activations", activations.string()},
             {"--actorder", "none", "--dampening_frac", "0.01", "--calibration-activations", activations.string()}}) {
        BOOST_TEST_CONTEXT(extra[0] << " " << extra[1]) {
            TempDir out;
            auto r = run_gptq(dir / "src", out / "o", extra);
            BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            auto v = run_moequant({"verify", "--source", (dir / "src").string(), "--converted", (out / "o").string(), "--quiet",
                                   "--calibration-activations", activations.string()});
            BOOST_TEST(v.exit_code == 0, v.out << v.err);
            const auto config = json::parse(read_text(out / "o" / "config.json")).as_object();
            const auto& weights = config.at("quantization_config").at("config_groups").at("group_0").at("weights");
            if (extra[1] == "group") {
                BOOST_TEST(weights.at("actorder") == "group");
                BOOST_TEST(written_tensors(out / "o").count("model.layers.1.mlp.experts.0.gate_proj.weight_g_idx"));
            }
            if (extra[1] == "none") BOOST_TEST(weights.at("actorder").is_null());
        }
    }
}

BOOST_AUTO_TEST_CASE(a_rerun_keeps_the_bytes_and_calibration_selection_changes_them) {
    TempDir dir;
    const fs::path activations = dir / "act.safetensors";
    synth(dir / "src", {"qwen3_moe", "bf16", "per-expert"}, activations);
    const std::vector<std::string> calibrated = {"--calibration-activations", activations.string()};
    BOOST_REQUIRE(run_gptq(dir / "src", dir / "a", calibrated).exit_code == 0);
    const auto first = file_hashes(dir / "a");
    auto again = run_gptq(dir / "src", dir / "a", calibrated);
    BOOST_TEST(again.exit_code == 0, again.err);
    BOOST_TEST((file_hashes(dir / "a") == first));
    // Fewer samples: a different job, written into a new folder, with other codes.
    auto fewer = calibrated;
    fewer.insert(fewer.end(), {"--num_calibration_samples", "2", "--max_sequence_length", "16"});
    BOOST_REQUIRE(run_gptq(dir / "src", dir / "b", fewer).exit_code == 0);
    BOOST_TEST((file_hashes(dir / "b") != first));
    auto refused = run_gptq(dir / "src", dir / "a", fewer);  // into the first job's folder
    BOOST_TEST(refused.exit_code == 5);
    BOOST_TEST(contains(refused.err, "OutputExists"), refused.err);
}

BOOST_AUTO_TEST_CASE(bad_calibration_and_requests_fail_with_one_clear_line) {
    TempDir dir;
    const fs::path activations = dir / "act.safetensors";
    synth(dir / "src", {"mixtral", "bf16", "per-expert"}, activations);
    auto one_line = [](const CommandResult& r) { return std::count(r.err.begin(), r.err.end(), '\n') == 1; };

    auto none = run_gptq(dir / "src", dir / "o1", {});
    BOOST_TEST(none.exit_code == 2);
    BOOST_TEST(contains(none.err, "NeedsCalibration"), none.err);
    BOOST_TEST(!fs::exists(dir / "o1"));

    // Activations of another model: layer width and layer set do not match.
    TempDir other;
    synth(other / "src", {"deepseek_v3", "bf16", "per-expert"}, other / "act.safetensors");
    auto wrong = run_gptq(dir / "src", dir / "o2", {"--calibration-activations", (other / "act.safetensors").string()});
    BOOST_TEST(wrong.exit_code == 3);
    BOOST_TEST(contains(wrong.err, "layers.0.moe_input"), wrong.err);
    BOOST_TEST(one_line(wrong), wrong.err);

    // A file that is not recorded activations.
    auto shard = run_gptq(dir / "src", dir / "o3", {"--calibration-activations", (dir / "src" / "model.safetensors.index.json").string()});
    BOOST_TEST(shard.exit_code == 3, shard.err);
    BOOST_TEST(one_line(shard), shard.err);
    const fs::path first_shard = [&] {
        for (const auto& e : fs::directory_iterator(dir / "src"))
            if (e.path().extension() == ".safetensors") return e.path();
        return fs::path();
    }();
    auto no_lengths = run_gptq(dir / "src", dir / "o4", {"--calibration-activations", first_shard.string()});
    BOOST_TEST(no_lengths.exit_code == 3);
    BOOST_TEST(contains(no_lengths.err, "sample_lengths"), no_lengths.err);

    auto experts = run_gptq(dir / "src", dir / "o5", {"--quant_method", "RTN", "--ignore_patterns", "re:.*experts\\.3\\..*"});
    BOOST_TEST(experts.exit_code == 2);
    BOOST_TEST(contains(experts.err, "IgnoredExperts"), experts.err);
    auto harmless = run_gptq(dir / "src", dir / "o6", {"--quant_method", "RTN", "--ignore_patterns", "lm_head", "re:.*self_attn.*"});
    BOOST_TEST(harmless.exit_code == 0, harmless.err);

    for (const auto& bad : std::vector<std::vector<std::string>>{{"--quant_type", "W3A16"}, {"--actorder", "sideways"},
                                                                 {"--quant_method", "AWQ"}, {"--dampening_frac", "2"}}) {
        auto r = run_gptq(dir / "src", dir / "o7", {bad[0], bad[1], "--calibration-activations", activations.string()});
        BOOST_TEST(r.exit_code == 2, bad[0] << ": " << r.err);
        BOOST_TEST(one_line(r), r.err);
    }
}

BOOST_AUTO_TEST_SUITE_END()
