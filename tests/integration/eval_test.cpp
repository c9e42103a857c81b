// `moequant eval` end to end: the source against itself is exactly KL 0 with equal
// perplexities; for several families AMXINT8 costs less KL than AMXINT4 and W8A16 RTN less than
// W4A16 RTN; --json has exactly the documented fields; a bounded run (--max-memory) gives the
// same numbers; bad inputs fail with one line and the usage, input or plugin exit code before
// any forward work (no progress line).

#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <functional>
#include <set>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

fs::path convert(const fs::path& model, const fs::path& out, const std::string& method) {
    auto r = run_moequant({"convert", "-i", model.string(), "-o", out.string(), "--quant-method", method, "--quiet"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return out;
}

fs::path rtn(const fs::path& model, const fs::path& out, const std::string& type) {
    auto r = run_moequant({"gptq", "--model_id", model.string(), "--output_dir", out.string(), "--quant_method", "RTN",
                           "--quant_type", type, "--quiet"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return out;
}

CommandResult run_eval(const fs::path& model, std::vector<std::string> extra) {
    std::vector<std::string> args = {"eval", "--model_id", model.string()};
    args.insert(args.end(), small_calibration_dataset.begin(), small_calibration_dataset.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return run_moequant(args);
}

json::object eval_json(const fs::path& model, std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--json", "-q"});
    auto r = run_eval(model, extra);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out).as_object();
}

double number(const json::object& o, const char* key) { return o.at(key).to_number<double>(); }

// One error line with the exit code and reason, and no forward work started (no progress).
void check_refused(const CommandResult& r, int code, const std::string& reason) {
    BOOST_TEST(r.exit_code == code);
    BOOST_TEST(contains(r.err, reason), r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    BOOST_TEST(!contains(r.err, "layer 0"), r.err);
    BOOST_TEST(r.out.empty());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(eval)

BOOST_AUTO_TEST_CASE(the_source_against_itself_has_kl_zero_and_equal_perplexities) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    const json::object r = eval_json(model);
    BOOST_TEST(number(r, "kl_mean") == 0.0);
    BOOST_TEST(number(r, "kl_p99") == 0.0);
    BOOST_TEST(number(r, "top1_agreement") == 1.0);
    BOOST_TEST(number(r, "perplexity_source") == number(r, "perplexity_quantized"));
    BOOST_TEST(number(r, "perplexity_source") > 1.0);
    for (const auto& layer : r.at("layers").as_array()) BOOST_TEST(number(layer.as_object(), "relative_output_error") == 0.0);
}

// More bits cost less, on the CPU formats and the GPU ones, in every family with a forward.
BOOST_AUTO_TEST_CASE(eight_bit_outputs_cost_less_kl_than_four_bit_ones) {
    const std::vector<std::pair<std::string, std::string>> families = {
        {"qwen3_moe", "bf16"},  {"deepseek_v3", "fp8"}, {"kimi_k2", "fp8"}, {"qwen3_next", "bf16"},
        {"minimax_m2", "fp8"}, {"glm4_moe", "bf16"},   {"mixtral", "bf16"},
        {"kimi_k26", "int4-ct"}};  // the release by name: a VLM with INT4 experts
    for (const auto& [family, dtype] : families) {
        BOOST_TEST_CONTEXT(family) {
            TempDir dir;
            const fs::path model = synth_checkpoint_in(dir, family, dtype);
            auto kl = [&](const char* flag, const fs::path& out) { return number(eval_json(model, {flag, out.string()}), "kl_mean"); };
            const double int4 = kl("--cpu-weights", convert(model, dir / "int4", "int4"));
            const double int8 = kl("--cpu-weights", convert(model, dir / "int8", "int8"));
            BOOST_TEST(int8 > 0.0);
            BOOST_TEST(int8 < int4);
            const double w4 = kl("--gpu-weights", rtn(model, dir / "w4", "W4A16"));
            const double w8 = kl("--gpu-weights", rtn(model, dir / "w8", "W8A16"));
            BOOST_TEST(w8 > 0.0);
            BOOST_TEST(w8 < w4);
        }
    }
}

BOOST_AUTO_TEST_CASE(json_has_exactly_the_documented_fields) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    const json::object r = eval_json(model, {"--cpu-weights", convert(model, dir / "int4", "int4").string()});
    std::set<std::string> keys;
    for (const auto& kv : r) keys.insert(std::string(kv.key()));
    BOOST_TEST((keys == std::set<std::string>{"perplexity_source", "perplexity_quantized", "kl_mean", "kl_p99",
                                              "top1_agreement", "tokens", "layers", "coverage"}));
    BOOST_TEST(r.at("tokens").as_int64() > 0);
    BOOST_TEST(number(r, "kl_p99") >= 0.0);
    BOOST_TEST(number(r, "top1_agreement") <= 1.0);
    const json::array& layers = r.at("layers").as_array();
    BOOST_TEST(layers.size() == 2u);  // the tiny preset's MoE layers
    for (const auto& layer : layers) {
        std::set<std::string> fields;
        for (const auto& kv : layer.as_object()) fields.insert(std::string(kv.key()));
        BOOST_TEST((fields == std::set<std::string>{"layer", "relative_output_error"}));
        BOOST_TEST(number(layer.as_object(), "relative_output_error") > 0.0);
    }
    // Coverage: every token of the 4 samples (the scored ones and each sample's last) chose
    // top-k experts in each MoE layer.
    const auto top_k = json::parse(read_text(model / "config.json")).at("num_experts_per_tok").to_number<std::int64_t>();
    const json::array& coverage = r.at("coverage").as_array();
    BOOST_TEST(coverage.size() == layers.size());
    for (const auto& entry : coverage) {
        const json::array& counts = entry.at("tokens_per_expert").as_array();
        std::int64_t sum = 0;
        for (const auto& c : counts) sum += c.as_int64();
        BOOST_TEST(counts.size() == 8u);
        BOOST_TEST(sum == (r.at("tokens").as_int64() + 4) * top_k);
        BOOST_TEST(entry.at("experts_without_tokens").as_array().empty());
    }
}

// Too few tokens to reach every expert: the experts that got none are named, in JSON and on
// stderr, as unmeasured.
BOOST_AUTO_TEST_CASE(experts_no_eval_token_reached_are_named) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    const std::string out = convert(model, dir / "int4", "int4").string();
    auto r = run_moequant({"eval", "--model_id", model.string(), "--dataset", "embedded", "--num_calibration_samples", "1",
                           "--max_sequence_length", "3", "--cpu-weights", out, "--json", "-q"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const json::object o = json::parse(r.out).as_object();
    std::size_t unreached = 0;
    for (const auto& entry : o.at("coverage").as_array()) {
        const json::array& counts = entry.at("tokens_per_expert").as_array();
        const json::array& none = entry.at("experts_without_tokens").as_array();
        std::size_t zeros = 0;
        for (const auto& c : counts) zeros += c.as_int64() == 0;
        BOOST_TEST(none.size() == zeros);
        BOOST_TEST(zeros >= 2u);  // 3 tokens x top-2 reach at most 6 of the 8 experts
        for (const auto& id : none) BOOST_TEST(counts.at(id.to_number<std::size_t>()).as_int64() == 0);
        unreached += zeros;
    }
    BOOST_TEST(contains(r.err, "moequant: note: eval coverage: " + std::to_string(unreached) + " expert(s) received no eval token"),
               r.err);
}

// Batches of one sample and mapped hidden states: the same numbers (up to BLAS rounding).
BOOST_AUTO_TEST_CASE(a_memory_bound_gives_the_same_numbers) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    const std::string out = convert(model, dir / "int4", "int4").string();
    const json::object free = eval_json(model, {"--cpu-weights", out});
    const json::object bound = eval_json(model, {"--cpu-weights", out, "--max-memory", "0.0001"});
    for (const char* key : {"perplexity_source", "perplexity_quantized", "kl_mean", "top1_agreement"})
        BOOST_TEST(number(bound, key) == number(free, key), boost::test_tools::tolerance(1e-4));
}

BOOST_AUTO_TEST_CASE(bad_inputs_are_refused_before_any_forward_work) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    const fs::path int4 = convert(model, dir / "int4", "int4");
    // Another model's output.
    const fs::path other = synth_checkpoint_in(dir, "mixtral", "bf16");
    check_refused(run_eval(model, {"--cpu-weights", convert(other, dir / "other", "int4").string()}), 3, "(OtherModel)");
    // An output missing an expert (a kt tree, one file removed).
    auto tree = run_moequant({"convert", "-i", model.string(), "-o", (dir / "tree").string(), "--no-merge-safetensor", "--quiet"});
    BOOST_REQUIRE_MESSAGE(tree.exit_code == 0, tree.err);
    bool removed = false;
    for (const auto& f : fs::recursive_directory_iterator(dir / "tree"))
        if (!removed && f.path().filename().string().starts_with("INT4_gate_3_")) removed = fs::remove(f.path());
    BOOST_REQUIRE(removed);
    check_refused(run_eval(model, {"--cpu-weights", (dir / "tree").string()}), 3, "expert 3 gate");
    // A manifest recording more threadpool parts than stored.
    fs::copy(int4, dir / "parts", fs::copy_options::recursive);
    const std::string manifest = read_text(dir / "parts" / "moequant-run.json");
    const std::size_t at = manifest.find("\"parts\":\"2\"");
    BOOST_REQUIRE(at != std::string::npos);
    write_text(dir / "parts" / "moequant-run.json", std::string(manifest).replace(at, 11, "\"parts\":\"3\""));
    check_refused(run_eval(model, {"--cpu-weights", (dir / "parts").string()}), 3, "(PartCountMismatch)");
    // Each flag takes its own side's output: a GPU scheme is not CPU experts, nor AMX GPU ones.
    const fs::path w8 = rtn(model, dir / "w8", "W8A16");
    check_refused(run_eval(model, {"--cpu-weights", w8.string()}), 3, "(WrongSide)");
    check_refused(run_eval(model, {"--gpu-weights", int4.string()}), 3, "(WrongSide)");
    // The hybrid model needs a placement, and a placement both outputs; a family without a forward.
    check_refused(run_eval(model, {"--cpu-weights", int4.string(), "--gpu-weights", int4.string()}), 2, "needs --placement");
    write_text(dir / "placement.json", R"({"layers": []})");
    check_refused(run_eval(model, {"--cpu-weights", int4.string(), "--placement", (dir / "placement.json").string()}), 2,
                  "--placement needs both");
    check_refused(run_eval(synth_checkpoint_in(dir, "deepseek_v4", "mxfp4"), {}), 4, "(NoForward)");
    check_refused(run_eval(synth_checkpoint_in(dir, "gpt_oss", "mxfp4"), {}), 4, "(NoForward)");
}

// The hybrid model: with no expert on the GPU it is the CPU output's model, with every expert
// there the GPU output's, and a placement that does not fit the model is refused up front.
BOOST_AUTO_TEST_CASE(hybrid_eval_follows_the_placement) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    const std::string cpu = convert(model, dir / "int4", "int4").string(), gpu = rtn(model, dir / "w8", "W8A16").string();
    const json::object inspected = json::parse(run_moequant({"inspect", "--json", model.string()}).out).at("plan").as_object();
    const json::array& moe_layers = inspected.at("moe_layers").as_array();
    const auto experts = inspected.at("num_experts").to_number<std::size_t>();
    auto placement = [&](const std::string& name, std::function<bool(std::size_t)> on_gpu, std::size_t entries) {
        json::array layers;
        for (const auto& l : moe_layers) {
            json::array mask;
            for (std::size_t e = 0; e < entries; ++e) mask.push_back(on_gpu(e));
            layers.push_back(json::object{{"layer", l}, {"gpu_experts_mask", std::move(mask)}});
        }
        const fs::path file = dir / name;
        write_text(file, json::serialize(json::object{{"layers", std::move(layers)}}));
        return file.string();
    };
    auto same = [](const json::object& a, const json::object& b) {
        for (const char* key : {"perplexity_quantized", "kl_mean", "kl_p99", "top1_agreement"})
            BOOST_TEST(number(a, key) == number(b, key), key);
    };
    const json::object cpu_only = eval_json(model, {"--cpu-weights", cpu});
    const json::object gpu_only = eval_json(model, {"--gpu-weights", gpu});
    auto hybrid = [&](const std::string& file) {
        return eval_json(model, {"--cpu-weights", cpu, "--gpu-weights", gpu, "--placement", file});
    };
    same(hybrid(placement("none.json", [](std::size_t) { return false; }, experts)), cpu_only);
    same(hybrid(placement("all.json", [](std::size_t) { return true; }, experts)), gpu_only);
    const json::object half = hybrid(placement("half.json", [](std::size_t e) { return e % 2 == 0; }, experts));
    BOOST_TEST(number(half, "kl_mean") != number(cpu_only, "kl_mean"));
    BOOST_TEST(number(half, "kl_mean") != number(gpu_only, "kl_mean"));

    const std::vector<std::string> both = {"--cpu-weights", cpu, "--gpu-weights", gpu, "--placement"};
    auto refused = [&](const std::string& file, const std::string& reason) {
        std::vector<std::string> args = both;
        args.push_back(file);
        check_refused(run_eval(model, args), 3, reason);
    };
    // (Layers other than 0: check_refused takes "layer 0" on stderr for a progress line.)
    write_text(dir / "short.json", R"({"layers": [{"layer": 1, "gpu_experts_mask": [true, false]}]})");
    refused((dir / "short.json").string(), "layer 1's gpu_experts_mask has 2 entries, the model has 8");
    write_text(dir / "beyond.json", R"({"layers": [{"layer": 9, "gpu_experts_mask": []}]})");
    refused((dir / "beyond.json").string(), "layer 9, which has no routed experts");
    write_text(dir / "broken.json", "{\"layers\": [");
    refused((dir / "broken.json").string(), "is not JSON");
}

BOOST_AUTO_TEST_SUITE_END()
