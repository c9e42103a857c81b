// `moequant hybrid`: one run from a source to the files kt-kernel + SGLang serve, on a
// synthesized DeepSeek-V3 (FP8). The GPU experts are the most used ones the budget holds, every
// output passes verify, the eval it reports is eval's own of the hybrid, SGLang's
// --init-expert-location makes its `frequency` strategy keep exactly those experts, the launch
// line names the files the run wrote, and a rerun keeps them. docs/hybrid.md.
#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/dtype_convert.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <numeric>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

const std::vector<std::string> calibration = {"--dataset", "embedded", "--num_calibration_samples", "4", "--max_sequence_length", "64"};

CommandResult run_hybrid(const fs::path& model, const fs::path& out, const std::string& gpu_memory, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"hybrid", "--model_id", model.string(), "--output", out.string(), "--gpu-memory", gpu_memory,
                                     "--eval-dataset", "embedded", "--eval-samples", "2", "--eval-max-length", "48"};
    args.insert(args.end(), calibration.begin(), calibration.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return run_moequant(args);
}

// The values SGLang's frequency strategy ranks: logical_count [1, layers, experts], read back
// through moequant's own reader of torch.save files.
std::vector<float> expert_location(const fs::path& pt, const TempDir& dir, Shape& shape) {
    fs::create_directories(dir / "pt");
    fs::copy_file(pt, dir / "pt" / "pytorch_model.bin");
    const Checkpoint c = Checkpoint::open(dir / "pt");
    BOOST_REQUIRE(c.contains("logical_count"));
    const TensorView v = c.view("logical_count");
    shape = v.shape;
    std::vector<float> values(v.elements());
    decode_to_f32(v, std::span(values));
    return values;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hybrid)

BOOST_AUTO_TEST_CASE(one_run_writes_what_sglang_serves_with_the_most_used_experts_on_the_gpu) {
    TempDir dir;
    synth_checkpoint(dir / "src", {"deepseek_v3", "fp8"}, {"--statistics", "trained"});
    // 3 MiB: the fixed part (about 2.6 MiB) and some but not all experts.
    auto r = run_hybrid(dir / "src", dir / "run", "3MiB");
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const json::object state = json::parse(read_text(dir / "run/hybrid.json")).as_object();
    const std::int64_t per_layer = state.at("gpu_experts_per_layer").to_number<std::int64_t>();
    const auto& bytes = state.at("gpu_weight_bytes").as_object();
    const std::uint64_t fixed = bytes.at("fixed").to_number<std::uint64_t>(), row = bytes.at("per_expert_of_every_layer").to_number<std::uint64_t>();
    const std::uint64_t budget = 3u << 20;
    // The most experts that fit: k fit, k + 1 do not.
    BOOST_TEST((per_layer > 0 && per_layer < 8), per_layer);
    BOOST_TEST(fixed + row * static_cast<std::uint64_t>(per_layer) <= budget);
    BOOST_TEST(fixed + row * static_cast<std::uint64_t>(per_layer + 1) > budget);
    // The fixed part is what the GPU checkpoint holds besides the routed experts.
    std::uint64_t written = 0;
    const Checkpoint gpu = Checkpoint::open(dir / "run/gpu");
    for (const std::string& name : gpu.tensor_names()) written += gpu.view(name).bytes.size();
    BOOST_TEST(written == fixed + row * 8);

    // The placement: the per_layer x 2 most routed experts over both MoE layers.
    const json::object placement = json::parse(read_text(dir / "run/placement.json")).as_object();
    BOOST_TEST(placement.at("num_gpu_experts").to_number<std::int64_t>() == 2 * per_layer);
    // SGLang sums logical_count over dimension 0 and keeps its top --kt-num-gpu-experts x layers:
    // exactly the placement's mask.
    Shape shape;
    const std::vector<float> location = expert_location(dir / "run/activation_stats.pt", dir, shape);
    BOOST_TEST((shape == Shape{1, 3, 8}));  // every layer of the model; layer 0 is dense
    std::vector<std::size_t> order(location.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return location[a] > location[b]; });
    BOOST_TEST(location[static_cast<std::size_t>(order[2 * per_layer - 1])] > location[static_cast<std::size_t>(order[2 * per_layer])]);  // no tie at the cut
    std::vector<bool> chosen(location.size(), false);
    for (std::int64_t i = 0; i < 2 * per_layer; ++i) chosen[order[static_cast<std::size_t>(i)]] = true;
    for (const json::value& layer : placement.at("layers").as_array()) {
        const std::int64_t l = layer.at("layer").to_number<std::int64_t>();
        const json::array& mask = layer.at("gpu_experts_mask").as_array();
        const json::array& counts = layer.at("routed_tokens").as_array();
        for (std::size_t e = 0; e < mask.size(); ++e) {
            BOOST_TEST(chosen[static_cast<std::size_t>(l * 8) + e] == mask[e].as_bool(), "layer " << l << " expert " << e);
            // More routed tokens never rank lower.
            for (std::size_t f = 0; f < counts.size(); ++f)
                if (counts[e].to_number<std::int64_t>() > counts[f].to_number<std::int64_t>())
                    BOOST_TEST(location[static_cast<std::size_t>(l * 8) + e] > location[static_cast<std::size_t>(l * 8) + f]);
        }
    }
    for (std::size_t e = 0; e < 8; ++e) BOOST_TEST(location[e] == 0.0f);  // the dense layer

    // The eval it reports is eval's of the hybrid model.
    std::vector<std::string> eval = {"eval", "--model_id", (dir / "src").string(), "--dataset", "embedded", "--num_calibration_samples", "2",
                                     "--max_sequence_length", "48", "--cpu-weights", (dir / "run/cpu").string(), "--gpu-weights",
                                     (dir / "run/gpu").string(), "--placement", (dir / "run/placement.json").string(), "--json", "-q"};
    auto e = run_moequant(eval);
    BOOST_REQUIRE_MESSAGE(e.exit_code == 0, e.err);
    BOOST_TEST(json::parse(e.out).at("kl_mean") == state.at("eval").at("kl_mean"));
    BOOST_TEST(state.at("eval").at("kl_mean").to_number<double>() > 0);

    // The launch line names these files and this placement.
    for (const std::string& part : std::vector<std::string>{"--model " + (dir / "run/gpu").string(), "--kt-weight-path " + (dir / "run/cpu").string(), "--kt-method AMXINT4",
                                    "--kt-threadpool-count 2", "--kt-num-gpu-experts " + std::to_string(per_layer),
                                    "--kt-expert-placement-strategy frequency", "--init-expert-location " + (dir / "run/activation_stats.pt").string()})
        BOOST_TEST(contains(r.out, part), part);
    BOOST_TEST(state.at("launch").as_string() == r.out.substr(r.out.find("python -m sglang.launch_server")));
    BOOST_TEST(contains(r.err, "[5/7] verify the GPU checkpoint: passed"), r.err);
    BOOST_TEST(contains(r.err, "[6/7] verify the CPU experts: passed"), r.err);

    // A rerun keeps every output.
    const auto gpu_files = file_hashes(dir / "run/gpu"), cpu_files = file_hashes(dir / "run/cpu");
    auto again = run_hybrid(dir / "src", dir / "run", "3MiB");
    BOOST_REQUIRE_MESSAGE(again.exit_code == 0, again.err);
    BOOST_TEST(contains(again.err, "calibration inputs already recorded"), again.err);
    BOOST_TEST(contains(again.err, "written by an earlier run with the same arguments, kept"), again.err);
    BOOST_TEST((file_hashes(dir / "run/gpu") == gpu_files));
    BOOST_TEST((file_hashes(dir / "run/cpu") == cpu_files));
    BOOST_TEST(json::parse(read_text(dir / "run/hybrid.json")).at("launch") == state.at("launch"));
}

// kt's RAWINT4 reads the GPU checkpoint (written as gptq --for kt-rawint4) for its CPU experts:
// no cpu/ folder, and the launch line names the one folder twice. --dry-run writes nothing and
// predicts the same GPU expert count.
BOOST_AUTO_TEST_CASE(rawint4_serves_one_checkpoint_and_the_dry_run_predicts_it) {
    TempDir dir;
    synth_checkpoint(dir / "src", {"deepseek_v3", "fp8"});
    auto dry = run_hybrid(dir / "src", dir / "dry", "3MiB", {"--kt-method", "RAWINT4", "--dry-run"});
    BOOST_REQUIRE_MESSAGE(dry.exit_code == 0, dry.err);
    BOOST_TEST(!fs::exists(dir / "dry"));
    auto r = run_hybrid(dir / "src", dir / "run", "3MiB", {"--kt-method", "RAWINT4"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST(!fs::exists(dir / "run/cpu"));
    const std::string gpu = (dir / "run/gpu").string();
    BOOST_TEST(contains(r.out, "--model " + gpu + " \\\n  --kt-weight-path " + gpu + " \\\n  --kt-method RAWINT4"), r.out);
    const auto config = json::parse(read_text(dir / "run/gpu/config.json")).as_object();
    BOOST_TEST(config.at("quantization_config").at("config_groups").at("group_0").at("weights").at("group_size") == 32);
    const std::string k = "--kt-num-gpu-experts " +
                          std::to_string(json::parse(read_text(dir / "run/hybrid.json")).at("gpu_experts_per_layer").to_number<std::int64_t>());
    BOOST_TEST(contains(r.out, k), r.out);
    BOOST_TEST(contains(dry.out, k), dry.out);
}

// --cpu-memory: AMXINT8 and AMXINT4 each tried with the fewest and the most GPU experts that fit
// both budgets, on the calibration text; the one with the lowest KL is served, within both.
BOOST_AUTO_TEST_CASE(cpu_memory_chooses_the_method_and_count_with_the_lowest_kl) {
    TempDir dir;
    synth_checkpoint(dir / "src", {"deepseek_v3", "fp8"}, {"--statistics", "trained"});
    // 2.5 MiB: AMXINT8 only with 2 GPU experts per layer, AMXINT4 with 0 to 2.
    auto r = run_hybrid(dir / "src", dir / "run", "3MiB", {"--cpu-memory", "2.5MiB"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const json::object state = json::parse(read_text(dir / "run/hybrid.json")).as_object();
    const json::array outputs = json::parse(read_text(dir / "run/eval.json")).as_array();
    BOOST_REQUIRE(outputs.size() == 4u);  // the hybrid, then AMXINT8 at 2, AMXINT4 at 0 and at 2
    double lowest = 1e9;
    std::string best;
    for (std::size_t i = 1; i < outputs.size(); ++i) {
        const double kl = outputs[i].at("kl_mean").to_number<double>();
        if (kl < lowest) {
            lowest = kl;
            best = std::string(outputs[i].at("name").as_string());
        }
    }
    const std::string method(state.at("kt_method").as_string());
    const std::int64_t per_layer = state.at("gpu_experts_per_layer").to_number<std::int64_t>();
    BOOST_TEST(best == method + " with " + std::to_string(per_layer) + " GPU experts per layer (calibration text)");
    const std::uint64_t cpu = state.at("cpu_memory").at("experts").to_number<std::uint64_t>();
    BOOST_TEST(cpu <= (5u << 19));
    BOOST_TEST(state.at("gpu_weight_bytes").at("total").to_number<std::uint64_t>() <= (3u << 20));
    const std::string folder = method == "AMXINT8" ? "cpu-int8" : "cpu-int4";
    BOOST_TEST(state.at("cpu_weights").as_string() == (dir / "run" / folder).string());
    BOOST_TEST(contains(r.out, "--kt-weight-path " + (dir / "run" / folder).string() + " \\\n  --kt-method " + method), r.out);
    BOOST_TEST(contains(r.err, "[6/7] verify the CPU experts: passed"), r.err);
}

// What cannot be served is refused before anything is written.
BOOST_AUTO_TEST_CASE(a_budget_or_method_that_cannot_be_served_is_refused) {
    TempDir dir;
    synth_checkpoint(dir / "src", {"deepseek_v3", "fp8"});
    fs::create_directories(dir / "busy");
    write_text(dir / "busy/notes.txt", "mine");
    check_refusals({{{"hybrid", "--model_id", (dir / "src").string(), "--output", (dir / "out").string(), "--gpu-memory", "1MiB"}, 2,
                     "does not hold the GPU checkpoint's weights outside the routed experts"},
                    {{"hybrid", "--model_id", (dir / "src").string(), "--output", (dir / "out").string(), "--gpu-memory", "8GiB", "--kt-method",
                      "MOE_INT4"},
                     2, "--kt-method must be"},
                    {{"hybrid", "--model_id", (dir / "src").string(), "--output", (dir / "out").string(), "--gpu-memory", "lots"}, 2,
                     "is not a size"},
                    {{"hybrid", "--model_id", (dir / "src").string(), "--output", (dir / "out").string(), "--gpu-memory", "3MiB",
                      "--cpu-memory", "1MiB"},
                     2, "do not hold the routed experts"},
                    {{"hybrid", "--model_id", (dir / "src").string(), "--output", (dir / "busy").string(), "--gpu-memory", "8GiB"}, 5,
                     "holds files that no moequant hybrid run wrote"}},
                   dir / "out");
    BOOST_TEST(read_text(dir / "busy/notes.txt") == "mine");
    BOOST_TEST(!fs::exists(dir / "busy/hybrid.json"));
}

BOOST_AUTO_TEST_SUITE_END()
