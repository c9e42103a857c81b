// `moequant gptq` end to end (the GPU path): for every family, synth (with recorded calibration
// activations) -> gptq (GPTQ and RTN, W4A16 and W8A16) -> verify passes; GPTQ's output error on
// its calibration data is below RTN's for every expert projection; config.json carries exactly
// the quantization_config structure of gptq-compressed-tensors.md §7 with an ignore list equal to
// the unquantized Linear modules actually written; FP8 is dequantized, MTP layers are not
// written; bad calibration input and unsupported requests fail with one clear line.

#include "checkpoint_rewrite.hpp"
#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/safetensors_reader.hpp>
#include <moequant/safetensors_writer.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <functional>
#include <set>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

const std::vector<SynthSource> sources = {
    {"deepseek_v3", "fp8", "per-expert"}, {"kimi_k2", "fp8", "per-expert"}, {"qwen3_next", "bf16", "per-expert"},
    {"glm4_moe", "fp8", "per-expert"},    {"qwen3_moe", "bf16", "fused-bmm"}, {"mixtral", "bf16", "fused-linear"},
    {"mixtral", "bf16", "per-expert"},    {"minimax_m2", "fp8", "per-expert"},
    {"deepseek_v32", "fp8", "per-expert"}, {"kimi_k25", "int4-ct", "per-expert"},
    {"kimi_k26", "int4-ct", "per-expert"}, {"minimax_m27", "fp8", "per-expert"},  // releases by name
    {"qwen3_5_moe", "bf16", "fused-linear"},
    {"glm_moe_dsa", "fp8", "per-expert"},  // --sample-tokens 48 is within its index_topk (64)
    {"minimax_m3", "mxfp8", "per-expert"},  // 48 tokens are within its sparse attention's dense window
};

// With calibration activations: 6 samples of 48 tokens.
void synth(const fs::path& out, const SynthSource& s, const fs::path& activations) {
    synth_checkpoint(out, s, {"--activations", activations.string(), "--samples", "6", "--sample-tokens", "48"});
}

CommandResult run_gptq(const fs::path& in, const fs::path& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"gptq", "--model_id", in.string(), "--output_dir", out.string(), "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_moequant(args);
}

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

// kt-kernel's convert_gpu_weights.py flags that mean nothing here are accepted, each said once,
// and change no byte; --max_cpu_memory is --max-memory written as accelerate writes sizes.
BOOST_AUTO_TEST_CASE(seed_tool_flags_are_accepted_with_their_meaning) {
    TempDir dir;
    synth(dir / "src", {"qwen3_moe", "bf16", "per-expert"}, dir / "act.safetensors");
    const std::vector<std::string> text = {"--dataset", "embedded", "--num_calibration_samples", "4", "--max_sequence_length", "32"};
    BOOST_REQUIRE(run_gptq(dir / "src", dir / "plain", text).exit_code == 0);
    std::vector<std::string> args = {"gptq", "--model_id", (dir / "src").string(), "--output_dir", (dir / "seed").string()};
    args.insert(args.end(), text.begin(), text.end());
    args.insert(args.end(), {"--trust_remote_code", "--force_cpu", "--max_gpu_memory", "40GiB", "--max_cpu_memory", "100GiB"});
    const auto seed = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(seed.exit_code == 0, seed.err);
    auto count = [&](const std::string& part) {
        std::size_t n = 0;
        for (auto at = seed.err.find(part); at != std::string::npos; at = seed.err.find(part, at + 1)) ++n;
        return n;
    };
    BOOST_TEST(count("--trust_remote_code: moequant reads weights and JSON only") == 1u, seed.err);
    BOOST_TEST(count("--force_cpu: moequant runs everything on the CPU") == 1u, seed.err);
    BOOST_TEST(count("--max_gpu_memory 40GiB has no effect") == 1u, seed.err);
    BOOST_TEST((file_hashes(dir / "seed") == file_hashes(dir / "plain")));

    auto refused = [&](std::vector<std::string> extra, const std::string& reason) {
        extra.insert(extra.begin(), text.begin(), text.end());
        const auto r = run_gptq(dir / "src", dir / "refused", extra);
        BOOST_TEST(r.exit_code == 2);
        BOOST_TEST(contains(r.err, reason), r.err);
        BOOST_TEST(!fs::exists(dir / "refused"));
    };
    refused({"--max_cpu_memory", "1GiB", "--max-memory", "1"}, "--max_cpu_memory and --max-memory are one limit");
    refused({"--max_cpu_memory", "lots"}, "--max_cpu_memory 'lots' is not a memory size");
    refused({"--max_gpu_memory", "40 GiB"}, "--max_gpu_memory '40 GiB' is not a memory size");
    refused({"--max_cpu_memory", "0GiB"}, "--max_cpu_memory '0GiB' is not a memory size");
}

// kt-kernel's defaults: W8A16, and a dataset even when none is named — here the embedded text,
// with a warning once. A Hub id is read from the local Hugging Face cache (a snapshot with
// JSON/JSONL files, split by the repository's file names) or refused with the export recipe.
BOOST_AUTO_TEST_CASE(seed_defaults_and_hub_ids_calibrate_offline) {
    TempDir dir;
    synth(dir / "src", {"qwen3_moe", "bf16", "per-expert"}, dir / "act.safetensors");
    const std::vector<std::string> small = {"--num_calibration_samples", "4", "--max_sequence_length", "32"};
    auto with = [&](std::vector<std::string> extra, const std::vector<std::string>& env = {}) {
        std::vector<std::string> args = {"gptq", "--model_id", (dir / "src").string()};
        args.insert(args.end(), extra.begin(), extra.end());
        args.insert(args.end(), small.begin(), small.end());
        return run_moequant(args, env);
    };
    const auto plain = with({"--output_dir", (dir / "plain").string(), "--quant_type", "W8A16", "--dataset", "embedded", "-q"});
    BOOST_REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
    const auto defaults = with({"--output_dir", (dir / "defaults").string(), "-q"});
    BOOST_REQUIRE_MESSAGE(defaults.exit_code == 0, defaults.err);
    BOOST_TEST(std::count(defaults.err.begin(), defaults.err.end(), '\n') == 1, defaults.err);
    BOOST_TEST(contains(defaults.err, "moequant: warning: no --dataset: GPTQ calibrates on the embedded text"), defaults.err);
    BOOST_TEST((file_hashes(dir / "defaults") == file_hashes(dir / "plain")));
    BOOST_TEST(json::parse(read_text(dir / "defaults" / "config.json")).at("quantization_config").at("config_groups").at("group_0")
                   .at("weights").at("num_bits") == 8);

    // The cache as huggingface_hub lays it out: refs/main names the snapshot; data files by split.
    const fs::path repo = dir / "hf" / "hub" / "datasets--someone--chats";
    const std::string commit(40, 'a');
    fs::create_directories(repo / "refs");
    write_text(repo / "refs" / "main", commit + "\n");
    const fs::path snapshot = repo / "snapshots" / commit;
    fs::create_directories(snapshot / "data");
    std::string train, test;
    for (int i = 0; i < 6; ++i) train += "{\"messages\": [{\"role\": \"user\", \"content\": \"question " + std::to_string(i) +
                                        "\"}, {\"role\": \"assistant\", \"content\": \"answer " + std::to_string(i) + "\"}]}\n";
    write_text(snapshot / "data" / "train_sft-00000-of-00002.jsonl", train);
    write_text(snapshot / "data" / "train_sft-00001-of-00002.json", "[{\"text\": \"a JSON array row\"}]");
    write_text(snapshot / "data" / "test_sft-00000-of-00001.jsonl", "{\"text\": \"not this split\"}\n");
    fs::create_directories(dir / "clone");
    fs::copy(snapshot / "data", dir / "clone" / "data", fs::copy_options::recursive);  // the same as a local clone
    const std::vector<std::string> cache = {"HF_HOME=" + (dir / "hf").string(), "HF_HUB_CACHE="};
    const auto hub = with({"--output_dir", (dir / "hub").string(), "--dataset", "someone/chats"}, cache);
    BOOST_REQUIRE_MESSAGE(hub.exit_code == 0, hub.err);
    BOOST_TEST(contains(hub.err, "4 sample(s)"), hub.err);
    const auto clone = with({"--output_dir", (dir / "clone-out").string(), "--dataset", (dir / "clone").string(), "-q"});
    BOOST_REQUIRE_MESSAGE(clone.exit_code == 0, clone.err);
    BOOST_TEST((file_hashes(dir / "hub") == file_hashes(dir / "clone-out")));
    BOOST_TEST((file_hashes(dir / "hub") != file_hashes(dir / "defaults")));

    auto refused = [&](const std::string& id, const std::string& reason) {
        const auto r = with({"--output_dir", (dir / "refused").string(), "--dataset", id, "-q"}, cache);
        BOOST_TEST(r.exit_code == 3);
        BOOST_TEST(contains(r.err, reason), r.err);
        BOOST_TEST(contains(r.err, "load_dataset('" + id + "', split='train_sft').to_json('data/train_sft.jsonl')"), r.err);
        BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
        BOOST_TEST(!fs::exists(dir / "refused"));
    };
    refused("HuggingFaceH4/ultrachat_200k", "names a Hub dataset that is not in the local Hugging Face cache");
    fs::create_directories(dir / "hf" / "hub" / "datasets--someone--parquet" / "snapshots" / commit / "data");
    write_text(dir / "hf" / "hub" / "datasets--someone--parquet" / "snapshots" / commit / "data" / "train_sft-00000-of-00001.parquet", "PAR1");
    refused("someone/parquet", "only in a form moequant does not read");
}

// --routed-only: each expert is calibrated on the tokens its layer's router sends it (a sigmoid
// router with groups and bias, and a softmax one); verify measures it the same way. An expert
// the router never picks (here: a bias of -100) is calibrated on all tokens, not zeroed. The
// mode is part of the job: an all-tokens run cannot continue into a routed-only folder.
BOOST_AUTO_TEST_CASE(routed_only_calibration_follows_each_familys_router) {
    for (const SynthSource& s : {SynthSource{"deepseek_v3", "bf16", "per-expert"}, SynthSource{"mixtral", "bf16", "per-expert"}}) {
        BOOST_TEST_CONTEXT(s.family) {
            TempDir dir;
            const fs::path activations = dir / "act.safetensors";
            synth(dir / "src", s, activations);
            fs::path source = dir / "src";
            const bool biased = s.family == "deepseek_v3";
            if (biased) {  // expert 3 of layer 1 is never chosen
                source = dir / "unrouted";
                rewrite(dir / "src", source, [](const std::string& name, std::optional<Replacement>& r) {
                    if (name != "model.layers.1.mlp.gate.e_score_correction_bias") return true;
                    std::vector<float> bias(8, 0.0f);
                    bias[3] = -100.0f;
                    std::vector<std::uint8_t> bytes(bias.size() * 4);
                    std::memcpy(bytes.data(), bias.data(), bytes.size());
                    r = Replacement{{name, DType::F32, {8}}, std::move(bytes)};
                    return true;
                });
            }
            const std::vector<std::string> routed = {"gptq", "--model_id", source.string(), "--output_dir",
                                                     (dir / "routed").string(), "--calibration-activations",
                                                     activations.string(), "--routed-only"};
            auto r = run_moequant(routed);
            BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            BOOST_TEST(contains(r.err, "routed tokens per expert"), r.err);
            BOOST_TEST(contains(r.err, biased ? "sigmoid + bias, top-2 of 2 groups keep 1" : "softmax, top-2, normalized"), r.err);
            BOOST_TEST(contains(r.err, "1 expert(s) (3) got no routed token") == biased, r.err);
            BOOST_TEST(contains(r.err, "note: calibration coverage: 1 expert(s) got no routed token and were calibrated on "
                                       "all tokens instead (layer 1: 3)") == biased, r.err);
            const std::string manifest = read_text(dir / "routed" / "moequant-run.json");
            BOOST_TEST(contains(manifest, "routed tokens"));
            const json::value run = json::parse(manifest);
            BOOST_TEST(run.at("command").as_string() == "gptq");  // the command that wrote it
            // The coverage record: each token goes to top-k = 2 experts; expert 3 of layer 1 got
            // none and is counted with all of the layer's tokens it was calibrated on instead.
            for (const auto& l : run.at("completed_layers").as_array()) {
                const auto& c = l.at("calibration").as_object();
                const auto tokens = c.at("tokens").to_number<std::int64_t>();
                BOOST_TEST(tokens == 6 * 48);  // --samples 6 --sample-tokens 48
                BOOST_TEST(c.at("routed_only").as_bool());
                std::int64_t routed = 0;
                const auto& counts = c.at("tokens_per_expert").as_array();
                BOOST_REQUIRE(counts.size() == c.at("experts").as_array().size());
                BOOST_REQUIRE(counts.size() == (s.family == "mixtral" ? 4u : 8u));
                for (const auto& n : counts) routed += n.to_number<std::int64_t>();
                const bool unrouted = biased && l.at("layer").to_number<int>() == 1;
                BOOST_TEST(c.at("fallback_experts").as_array() == (unrouted ? json::array{3} : json::array{}));
                BOOST_TEST(routed == 2 * tokens + (unrouted ? tokens : 0));
            }

            auto v = run_moequant({"verify", "--source", source.string(), "--converted", (dir / "routed").string(), "--json",
                                   "--quiet", "--calibration-activations", activations.string(), "--routed-only"});
            BOOST_TEST(v.exit_code == 0, v.out << v.err);
            std::size_t parts = 0;
            const json::value report = json::parse(v.out);
            for (const auto& part : report.at("tensors").as_array()) {
                const auto& c = part.as_object();
                ++parts;
                BOOST_TEST(c.at("output_error").as_double() < c.at("reference_output_error").as_double(),
                           c.at("location").as_string());
            }
            BOOST_TEST(parts > 0u);

            // All tokens for every expert: other codes; and not into the routed-only job's folder.
            BOOST_REQUIRE(run_gptq(source, dir / "all", {"--calibration-activations", activations.string()}).exit_code == 0);
            BOOST_TEST((file_hashes(dir / "all") != file_hashes(dir / "routed")));
            const json::value all_run = json::parse(read_text(dir / "all" / "moequant-run.json"));
            for (const auto& l : all_run.at("completed_layers").as_array()) {
                const auto& c = l.at("calibration");
                BOOST_TEST(!c.at("routed_only").as_bool());
                BOOST_TEST(c.at("fallback_experts").as_array().empty());
                for (const auto& n : c.at("tokens_per_expert").as_array()) BOOST_TEST(n == c.at("tokens"));
            }
            auto refused = run_gptq(source, dir / "routed", {"--calibration-activations", activations.string()});
            BOOST_TEST(refused.exit_code == 5, refused.err);
        }
    }
}

// Routed-only calibration needs every MoE layer's router: checked before any file is written.
BOOST_AUTO_TEST_CASE(routed_only_without_a_router_is_refused_before_any_file) {
    TempDir dir;
    const fs::path activations = dir / "act.safetensors";
    synth(dir / "src", {"glm4_moe", "bf16", "per-expert"}, activations);
    rewrite(dir / "src", dir / "no_bias", [](const std::string& name, std::optional<Replacement>&) {
        return name != "model.layers.2.mlp.gate.e_score_correction_bias";
    });
    const std::vector<std::string> routed = {"--calibration-activations", activations.string(), "--routed-only"};
    auto missing = run_gptq(dir / "no_bias", dir / "o1", routed);
    BOOST_TEST(missing.exit_code == 3, missing.err);
    BOOST_TEST(contains(missing.err, "layer 2 has no e_score_correction_bias"), missing.err);
    BOOST_TEST(!fs::exists(dir / "o1"));
    rewrite_as_zeros(dir / "src", dir / "narrow", "model.layers.1.mlp.gate.weight", DType::BF16, {8, 128});
    auto narrow = run_gptq(dir / "narrow", dir / "o2", routed);
    BOOST_TEST(narrow.exit_code == 3, narrow.err);
    BOOST_TEST(contains(narrow.err, "model.layers.1.mlp.gate.weight"), narrow.err);
    BOOST_TEST(contains(narrow.err, "BadRouter"), narrow.err);
    BOOST_TEST(!fs::exists(dir / "o2"));
    // Without calibration data the flag means nothing: a usage error.
    auto alone = run_gptq(dir / "src", dir / "o3", {"--routed-only"});
    BOOST_TEST(alone.exit_code == 2, alone.err);
    BOOST_TEST(!fs::exists(dir / "o3"));
}

// DeepSeek-V3.2 and GLM-5 calibrate on V3's dense MLA, which is their forward only while every
// sample has at most index_topk tokens (model-families-2026.md §3.1, §3.4): longer samples are
// refused with the option to change and the family named, samples within the limit calibrate.
static void expect_calibration_limited_to_index_topk(const std::string& family, const std::string& named) {
    TempDir dir;
    auto made = run_moequant({"synth", "--family", family, "--out", (dir / "src").string()});
    BOOST_REQUIRE_MESSAGE(made.exit_code == 0, made.err);
    const auto config = json::parse(read_text(dir / "src" / "config.json")).as_object();
    const std::int64_t topk = config.at("index_topk").to_number<std::int64_t>();
    auto calibrated = [&](const fs::path& out, std::int64_t length) {
        return run_gptq(dir / "src", out, {"--dataset", "embedded", "--num_calibration_samples", "4",
                                           "--max_sequence_length", std::to_string(length)});
    };
    auto refused = calibrated(dir / "long", 4 * topk);
    BOOST_TEST(refused.exit_code == 3, refused.err);
    BOOST_TEST(contains(refused.err, "index_topk (" + std::to_string(topk) + ")"), refused.err);
    BOOST_TEST(contains(refused.err, named + "'s sparse attention"), refused.err);
    BOOST_TEST(contains(refused.err, "--max_sequence_length " + std::to_string(topk)), refused.err);
    BOOST_TEST(!fs::exists(dir / "long" / "config.json"));
    auto within = calibrated(dir / "short", topk);
    BOOST_TEST(within.exit_code == 0, within.err);
    BOOST_TEST(fs::exists(dir / "short" / "config.json"));
    // record runs the same forward (its default is 2048 tokens per row).
    auto recorded = run_moequant({"record", "--model_id", (dir / "src").string(), "--dataset", "embedded",
                                  "--num_calibration_samples", "2", "--output", (dir / "act.safetensors").string(), "--quiet"});
    BOOST_TEST(recorded.exit_code == 3, recorded.err);
    BOOST_TEST(contains(recorded.err, "index_topk"), recorded.err);
    BOOST_TEST(!fs::exists(dir / "act.safetensors"));
}

BOOST_AUTO_TEST_CASE(deepseek_v32_calibration_is_refused_beyond_index_topk) {
    expect_calibration_limited_to_index_topk("deepseek_v32", "DeepSeek-V3.2");
}

BOOST_AUTO_TEST_CASE(glm_moe_dsa_calibration_is_refused_beyond_index_topk) {
    expect_calibration_limited_to_index_topk("glm_moe_dsa", "GLM-5");
}

// GLM-5's attention rotates interleaved pairs whatever the config says (transformers
// GlmMoeDsaAttention); a config claiming rotate-half is refused rather than run either way.
BOOST_AUTO_TEST_CASE(glm_moe_dsa_rotate_half_rope_is_refused) {
    TempDir dir;
    auto made = run_moequant({"synth", "--family", "glm_moe_dsa", "--out", (dir / "good").string()});
    BOOST_REQUIRE_MESSAGE(made.exit_code == 0, made.err);
    rewrite_config(dir / "good", dir / "src", [](json::object& c) { c["rope_interleave"] = false; });
    auto r = run_gptq(dir / "src", dir / "o", {"--dataset", "embedded", "--max_sequence_length", "32"});
    BOOST_TEST(r.exit_code == 3, r.err);
    BOOST_TEST(contains(r.err, "config.json"), r.err);
    BOOST_TEST(contains(r.err, "'rope_interleave' is false"), r.err);
    BOOST_TEST(!fs::exists(dir / "o" / "config.json"));
}

BOOST_AUTO_TEST_CASE(bad_calibration_and_requests_fail_with_one_clear_line) {
    TempDir dir;
    const fs::path activations = dir / "act.safetensors";
    synth(dir / "src", {"mixtral", "bf16", "per-expert"}, activations);
    auto one_line = [](const CommandResult& r) { return std::count(r.err.begin(), r.err.end(), '\n') == 1; };


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

    // Patterns that would leave part of an expert, or every expert, unquantized.
    for (const auto& [pattern, code] : {std::pair{"re:.*experts\\.3\\..*", "PartialExpertIgnore"},
                                        std::pair{"re:.*\\.w2", "PartialExpertIgnore"}, std::pair{"re:.*experts.*", "NothingToQuantize"}}) {
        auto r = run_gptq(dir / "src", dir / "o5", {"--quant_method", "RTN", "--ignore_patterns", pattern});
        BOOST_TEST(r.exit_code == 2, pattern << ": " << r.err);
        BOOST_TEST(contains(r.err, code), r.err);
        BOOST_TEST(!fs::exists(dir / "o5"));
    }
    auto harmless = run_gptq(dir / "src", dir / "o6", {"--quant_method", "RTN", "--ignore_patterns", "lm_head", "re:.*self_attn.*"});
    BOOST_TEST(harmless.exit_code == 0, harmless.err);

    for (const auto& bad : std::vector<std::vector<std::string>>{{"--quant_type", "W3A16"}, {"--actorder", "sideways"},
                                                                 {"--quant_method", "AWQ"}, {"--dampening_frac", "2"}}) {
        auto r = run_gptq(dir / "src", dir / "o7", {bad[0], bad[1], "--calibration-activations", activations.string()});
        BOOST_TEST(r.exit_code == 2, bad[0] << ": " << r.err);
        BOOST_TEST(one_line(r), r.err);
    }
}

namespace {

// A recorded-activations file of `rows` tokens for the given layers, with `lengths` as sample_lengths.
void write_activations(const fs::path& file, const std::vector<std::int64_t>& layers, std::int64_t rows,
                       std::int64_t hidden, const std::vector<std::int64_t>& lengths, DType lengths_dtype = DType::I64) {
    std::vector<TensorSpec> specs;
    for (auto l : layers) specs.push_back({"layers." + std::to_string(l) + ".moe_input", DType::BF16, {rows, hidden}});
    specs.push_back({"sample_lengths", lengths_dtype, {static_cast<std::int64_t>(lengths.size())}});
    SafetensorsWriter w(file, specs);
    const std::vector<std::uint16_t> values(static_cast<std::size_t>(rows * hidden), 0x3F80);  // 1.0
    for (auto l : layers) w.write("layers." + std::to_string(l) + ".moe_input", std::as_bytes(std::span(values)));
    if (lengths_dtype == DType::I64) {
        w.write("sample_lengths", std::as_bytes(std::span(lengths)));
    } else {
        std::vector<std::int32_t> narrow(lengths.begin(), lengths.end());
        w.write("sample_lengths", std::as_bytes(std::span(narrow)));
    }
    w.finish();
}

}  // namespace

// Every malformed activations file is refused before the output folder exists, with exit 3 and
// one line naming the file's tensor and the reason.
BOOST_AUTO_TEST_CASE(malformed_activation_files_are_refused_naming_the_tensor) {
    TempDir dir;
    synth(dir / "src", {"mixtral", "bf16", "per-expert"}, dir / "good.safetensors");
    const std::int64_t hidden = 256;
    const std::vector<std::int64_t> layers = {0, 1};
    struct Bad {
        std::string name;
        std::function<void(const fs::path&)> write;
        std::vector<std::string> expected;
    };
    const std::vector<Bad> cases = {
        {"rows", [&](const fs::path& f) { write_activations(f, layers, 40, hidden, {16, 16}); },
         {"layers.0.moe_input", "BadCalibration", "[32, hidden]"}},
        {"negative", [&](const fs::path& f) { write_activations(f, layers, 16, hidden, {20, -4}); },
         {"sample_lengths", "BadCalibration", "negative"}},
        {"empty", [&](const fs::path& f) { write_activations(f, layers, 0, hidden, {0, 0}); },
         {"sample_lengths", "BadCalibration", "no tokens"}},
        {"i32", [&](const fs::path& f) { write_activations(f, layers, 32, hidden, {16, 16}, DType::I32); },
         {"sample_lengths", "BadCalibration", "I64"}},
        {"layer", [&](const fs::path& f) { write_activations(f, {0}, 32, hidden, {16, 16}); },
         {"layers.1.moe_input", "MissingTensor"}},
        {"width", [&](const fs::path& f) { write_activations(f, layers, 32, 128, {16, 16}); },
         {"layers.0.moe_input", "BadCalibration", "hidden_size is 256"}},
    };
    for (const auto& c : cases) {
        BOOST_TEST_CONTEXT(c.name) {
            const fs::path file = dir / (c.name + ".safetensors");
            c.write(file);
            const fs::path out = dir / ("out_" + c.name);
            auto r = run_gptq(dir / "src", out, {"--calibration-activations", file.string()});
            BOOST_TEST(r.exit_code == 3, r.err);
            BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
            for (const auto& part : c.expected) BOOST_TEST(contains(r.err, part), "missing '" << part << "' in " << r.err);
            BOOST_TEST(!fs::exists(out));
        }
    }
}

// Expert shapes vLLM/SGLang's Marlin kernels cannot run are refused before any file; with
// --allow-unaligned an in_features the group size does not divide gets ceil(K/128) groups, the
// last one shorter (compressed-tensors' shape, with a warning), through GPTQ and RTN, the
// writer, the reader and verify.
BOOST_AUTO_TEST_CASE(unaligned_shapes_are_refused_unless_allowed_then_groups_are_ragged) {
    TempDir dir;
    synth(dir / "src", {"mixtral", "bf16", "per-expert"}, dir / "act.safetensors");
    const std::int64_t inter = 192, hidden = 256;  // N % 64 holds, K = 192 of down (w2) breaks K % 128
    std::uint32_t state = 12345;
    auto random_bf16 = [&](std::size_t count) {
        std::vector<std::uint8_t> bytes(count * 2);
        for (std::size_t i = 0; i < count; ++i) {
            state = state * 1664525u + 1013904223u;
            const float v = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.1f;
            const std::uint16_t b = f32_to_bf16(v);
            std::memcpy(&bytes[i * 2], &b, 2);
        }
        return bytes;
    };
    rewrite(dir / "src", dir / "odd",
            [&](const std::string& name, std::optional<Replacement>& r) {
                const bool gate_up = name.ends_with(".w1.weight") || name.ends_with(".w3.weight");
                if (!contains(name, ".experts.") || !(gate_up || name.ends_with(".w2.weight"))) return true;
                const Shape shape = gate_up ? Shape{inter, hidden} : Shape{hidden, inter};
                r = Replacement{{name, DType::BF16, shape}, random_bf16(static_cast<std::size_t>(inter * hidden))};
                return true;
            },
            [&](json::object& c) { c["intermediate_size"] = inter; });
    auto refused = run_gptq(dir / "odd", dir / "o1", {"--quant_method", "RTN"});
    BOOST_TEST(refused.exit_code == 3, refused.err);
    BOOST_TEST(contains(refused.err, "UnalignedShape"), refused.err);
    BOOST_TEST(contains(refused.err, "w2.weight"), refused.err);
    BOOST_TEST(contains(refused.err, "Marlin"), refused.err);
    BOOST_TEST(!fs::exists(dir / "o1"));
    const fs::path activations = dir / "odd_act.safetensors";
    auto recorded = run_moequant({"record", "--model_id", (dir / "odd").string(), "--dataset", "embedded", "--output",
                                  activations.string(), "-q"});
    BOOST_REQUIRE_MESSAGE(recorded.exit_code == 0, recorded.err);
    for (const std::string method : {"RTN", "GPTQ"}) {
        const fs::path out = dir / method;
        auto r = run_gptq(dir / "odd", out, {"--quant_method", method, "--quant_type", "W4A16", "--allow-unaligned",
                                              "--calibration-activations", activations.string()});
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        BOOST_TEST(contains(r.err, "moequant: warning: in_features 192 of model.layers.0.block_sparse_moe.experts.0.w2.weight "
                                   "(and the other experts') is not a multiple of group_size 128: 2 groups a row, the last of 64 columns"),
                   r.err);
        const auto tensors = written_tensors(out);
        const std::string down = "model.layers.0.block_sparse_moe.experts.0.w2";
        BOOST_REQUIRE(tensors.count(down + ".weight_scale"));
        BOOST_TEST((tensors.at(down + ".weight_scale").shape == Shape{hidden, 2}));
        BOOST_TEST((tensors.at(down + ".weight_packed").shape == Shape{hidden, inter / 8}));
        auto v = run_moequant({"verify", "--source", (dir / "odd").string(), "--converted", out.string(), "--quiet",
                               "--calibration-activations", activations.string()});
        BOOST_TEST(v.exit_code == 0, method << ": " << v.out << v.err);
        auto e = run_moequant({"eval", "--model_id", (dir / "odd").string(), "--dataset", "embedded", "--gpu-weights", out.string(),
                               "--num_calibration_samples", "2", "-q"});
        BOOST_TEST(e.exit_code == 0, method << ": " << e.err);
    }
}

// --ignore_patterns selecting whole MoE layers: those layers' experts are written in BF16 (FP8
// dequantized) under their module names and listed in `ignore`; the other layers are quantized as
// usual; verify compares the kept weights with the source exactly and fails a changed one; an
// output whose BF16 expert `ignore` does not list is refused (vLLM would not load it).
BOOST_AUTO_TEST_CASE(ignored_moe_layers_keep_their_experts_in_bf16) {
    TempDir dir;
    const fs::path activations = dir / "act.safetensors";
    synth(dir / "src", {"deepseek_v3", "fp8", "per-expert"}, activations);  // MoE layers 1 and 2
    const std::vector<std::string> args = {"--calibration-activations", activations.string(), "--ignore_patterns",
                                           "re:.*layers\\.2\\.mlp\\.experts\\..*"};
    auto r = run_gptq(dir / "src", dir / "out", args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto tensors = written_tensors(dir / "out");
    const auto config = json::parse(read_text(dir / "out" / "config.json")).as_object();
    std::set<std::string> ignore;
    for (const auto& n : config.at("quantization_config").at("ignore").as_array()) ignore.insert(std::string(n.as_string()));
    BOOST_TEST((ignore == unquantized_linears(tensors)));
    for (int layer : {1, 2})
        for (int e = 0; e < 8; ++e)
            for (const char* p : {"gate_proj", "up_proj", "down_proj"}) {
                const std::string module = "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(e) + "." + p;
                if (layer == 2) {
                    BOOST_TEST(ignore.count(module), module);
                    BOOST_REQUIRE(tensors.count(module + ".weight"));
                    BOOST_TEST((tensors.at(module + ".weight").dtype == DType::BF16));
                    BOOST_TEST((tensors.at(module + ".weight").shape == (std::string(p) == "down_proj" ? Shape{256, 256} : Shape{256, 256})));
                    BOOST_TEST(!tensors.count(module + ".weight_packed"));
                } else {
                    BOOST_TEST(!ignore.count(module), module);
                    BOOST_TEST(tensors.count(module + ".weight_packed"), module);
                }
            }
    auto v = run_moequant({"verify", "--source", (dir / "src").string(), "--converted", (dir / "out").string(), "--json",
                           "--quiet", "--calibration-activations", activations.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);
    const json::value report = json::parse(v.out);
    std::size_t kept = 0;
    for (const auto& part : report.at("tensors").as_array())
        if (part.at("layer").to_number<int>() == 2) {
            ++kept;
            BOOST_TEST(part.at("max_abs_error").to_number<double>() == 0.0);
        }
    BOOST_TEST(kept == 24u);

    // One kept element changed: verify fails that part.
    const std::string kept_tensor = "model.layers.2.mlp.experts.5.up_proj.weight";
    fs::copy(dir / "out", dir / "changed", fs::copy_options::recursive);
    edit_tensor_bytes(dir / "changed", kept_tensor, [](std::uint8_t* p, std::size_t) { p[1] ^= 0x40; });
    auto changed = run_moequant({"verify", "--source", (dir / "src").string(), "--converted", (dir / "changed").string(), "--quiet"});
    BOOST_TEST(changed.exit_code == 6, changed.out << changed.err);
    BOOST_TEST(contains(changed.out, "differs from the source"), changed.out);
    // A BF16 expert that `ignore` does not list: not a checkpoint vLLM loads.
    fs::copy(dir / "out", dir / "unlisted", fs::copy_options::recursive);
    auto c = json::parse(read_text(dir / "out" / "config.json")).as_object();
    auto& list = c["quantization_config"].as_object()["ignore"].as_array();
    list.erase(std::find(list.begin(), list.end(), json::value("model.layers.2.mlp.experts.5.up_proj")));
    write_text(dir / "unlisted" / "config.json", json::serialize(c));
    auto unlisted = run_moequant({"verify", "--source", (dir / "src").string(), "--converted", (dir / "unlisted").string(), "--quiet"});
    BOOST_TEST(unlisted.exit_code == 3, unlisted.err);
    BOOST_TEST(contains(unlisted.err, "UnlistedUnquantized"), unlisted.err);
}

// --torch_dtype casts what is copied unquantized as transformers' from_pretrained(torch_dtype=)
// does: every floating tensor and the experts of an ignored layer, but the router's
// e_score_correction_bias (DeepSeek-V3's _keep_in_fp32_modules_strict), which stays F32; the
// output's config.json says the dtype, and verify holds the kept experts to the source rounded.
BOOST_AUTO_TEST_CASE(torch_dtype_casts_the_copies_but_fp32_modules) {
    TempDir dir;
    synth(dir / "src", {"deepseek_v3", "bf16", "per-expert"}, dir / "act.safetensors");
    const auto source = written_tensors(dir / "src");
    for (const std::string dtype : {"float16", "float32"}) {
        const fs::path out = dir / dtype;
        auto r = run_gptq(dir / "src", out, {"--quant_method", "RTN", "--quant_type", "W4A16", "--torch_dtype", dtype,
                                              "--ignore_patterns", "re:.*layers\\.2\\.mlp\\.experts\\..*"});
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        const DType expected = dtype == "float16" ? DType::F16 : DType::F32;
        std::size_t biases = 0, kept_experts = 0;
        for (const auto& [name, t] : written_tensors(out)) {
            if (contains(name, ".weight_")) continue;  // the quantized experts' own tensors
            const bool bias = name.ends_with("e_score_correction_bias");
            biases += bias;
            kept_experts += contains(name, "layers.2.mlp.experts.");
            BOOST_REQUIRE_MESSAGE(source.count(name) || contains(name, ".experts."), name);
            BOOST_TEST((t.dtype == (bias ? DType::F32 : expected)), dtype << " " << name);
        }
        BOOST_TEST(biases == 2u);  // MoE layers 1 and 2
        BOOST_TEST(kept_experts == 24u);
        const auto config = json::parse(read_text(out / "config.json")).as_object();
        BOOST_TEST(config.at("torch_dtype").as_string() == dtype);
        auto v = run_moequant({"verify", "--source", (dir / "src").string(), "--converted", out.string(), "--quiet"});
        BOOST_TEST(v.exit_code == 0, dtype << ": " << v.out << v.err);
    }
    auto bad = run_gptq(dir / "src", dir / "bad", {"--quant_method", "RTN", "--torch_dtype", "fp16"});
    BOOST_TEST(bad.exit_code == 2);
    BOOST_TEST(contains(bad.err, "--torch_dtype must be bfloat16, float16 or float32, got 'fp16'"), bad.err);
    BOOST_TEST(!fs::exists(dir / "bad"));
}

// verify fails a compressed-tensors output whose stored bytes are wrong: a scale that is not the
// observer's, codes that make GPTQ worse than RTN on the calibration data; and refuses an
// unfinished one.
BOOST_AUTO_TEST_CASE(verify_fails_damaged_compressed_tensors_outputs) {
    TempDir dir;
    const fs::path activations = dir / "act.safetensors";
    synth(dir / "src", {"qwen3_moe", "bf16", "per-expert"}, activations);
    BOOST_REQUIRE(run_gptq(dir / "src", dir / "out", {"--calibration-activations", activations.string()}).exit_code == 0);
    auto verify = [&](const fs::path& out) {
        return run_moequant({"verify", "--source", (dir / "src").string(), "--converted", out.string(), "--quiet",
                             "--calibration-activations", activations.string()});
    };
    const std::string module = "model.layers.0.mlp.experts.1.down_proj";

    fs::copy(dir / "out", dir / "scale", fs::copy_options::recursive);
    edit_tensor_bytes(dir / "scale", module + ".weight_scale", [](std::uint8_t* p, std::size_t) { p[1] ^= 0x01; });
    auto bad_scale = verify(dir / "scale");
    BOOST_TEST(bad_scale.exit_code == 6, bad_scale.out);
    BOOST_TEST(contains(bad_scale.out, "weight_scale value(s) differ from the min-max observer's"), bad_scale.out);
    BOOST_TEST(contains(bad_scale.out, module), bad_scale.out);

    fs::copy(dir / "out", dir / "codes", fs::copy_options::recursive);
    edit_tensor_bytes(dir / "codes", module + ".weight_packed", [](std::uint8_t* p, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) p[i] ^= 0x77;  // every nibble moved far from its code
    });
    auto bad_codes = verify(dir / "codes");
    BOOST_TEST(bad_codes.exit_code == 6, bad_codes.out);
    BOOST_TEST(contains(bad_codes.out, "exceeds rtn's"), bad_codes.out);

    fs::copy(dir / "out", dir / "unfinished", fs::copy_options::recursive);
    fs::remove(dir / "unfinished" / "model.safetensors.index.json");
    auto unfinished = verify(dir / "unfinished");
    BOOST_TEST(unfinished.exit_code == 3, unfinished.err);
    BOOST_TEST(contains(unfinished.err, "IncompleteOutput"), unfinished.err);
    BOOST_TEST(verify(dir / "out").exit_code == 0);
}

BOOST_AUTO_TEST_SUITE_END()
