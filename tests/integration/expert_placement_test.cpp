// `moequant plan`: routers run on recorded MoE inputs, GPU experts placed by kt-kernel's
// strategies. Checked against the routing counts the placement itself reports (each layer's
// counts sum to tokens x top-k), and with an expert made to win every token by its
// e_score_correction_bias.
#include "checkpoint_rewrite.hpp"
#include "test_support.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cstring>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

struct Placed {
    json::object doc;
    std::vector<std::vector<std::int64_t>> counts;
    std::vector<std::vector<bool>> gpu;
};

Placed run_plan(const fs::path& model, const fs::path& activations, std::int64_t n, const std::string& strategy) {
    auto r = run_moequant({"plan", "--model_id", model.string(), "--activations", activations.string(), "--num-gpu-experts",
                           std::to_string(n), "--strategy", strategy, "--json"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Placed p;
    p.doc = json::parse(r.out).as_object();
    for (const auto& layer : p.doc.at("layers").as_array()) {
        std::vector<std::int64_t> counts;
        std::vector<bool> gpu;
        for (const auto& c : layer.at("routed_tokens").as_array()) counts.push_back(c.to_number<std::int64_t>());
        for (const auto& m : layer.at("gpu_experts_mask").as_array()) gpu.push_back(m.as_bool());
        p.counts.push_back(counts);
        p.gpu.push_back(gpu);
    }
    return p;
}

std::int64_t on_gpu(const Placed& p) {
    std::int64_t n = 0;
    for (const auto& l : p.gpu) n += std::count(l.begin(), l.end(), true);
    return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(expert_placement)

BOOST_AUTO_TEST_CASE(strategies_place_the_most_used_experts) {
    TempDir dir;
    auto s = run_moequant({"synth", "--family", "qwen3_moe", "--out", (dir / "m").string(), "--activations",
                           (dir / "a.safetensors").string(), "--samples", "4", "--sample-tokens", "40"});
    BOOST_REQUIRE_MESSAGE(s.exit_code == 0, s.err);
    const Placed freq = run_plan(dir / "m", dir / "a.safetensors", 5, "frequency");
    const std::int64_t tokens = freq.doc.at("calibration").at("tokens").to_number<std::int64_t>();
    BOOST_TEST(tokens == 160);
    for (const auto& layer : freq.counts) {
        std::int64_t sum = 0;
        for (auto c : layer) sum += c;
        BOOST_TEST(sum == tokens * 2);  // top-2 of the synthesized Qwen3-MoE
    }
    BOOST_TEST(on_gpu(freq) == 5);
    // Frequency: every GPU expert is used at least as often as every CPU expert, over all layers.
    std::int64_t least_gpu = INT64_MAX, most_cpu = 0;
    for (std::size_t l = 0; l < freq.gpu.size(); ++l)
        for (std::size_t e = 0; e < freq.gpu[l].size(); ++e)
            (freq.gpu[l][e] ? least_gpu = std::min(least_gpu, freq.counts[l][e])
                            : most_cpu = std::max(most_cpu, freq.counts[l][e]));
    BOOST_TEST(least_gpu >= most_cpu);

    // Uniform: the same number per layer (remainder to the first), the most used of each.
    const std::size_t layers = freq.gpu.size();
    const std::int64_t n = static_cast<std::int64_t>(layers) * 2 + 1;
    const Placed uniform = run_plan(dir / "m", dir / "a.safetensors", n, "uniform");
    for (std::size_t l = 0; l < layers; ++l) {
        BOOST_TEST(std::count(uniform.gpu[l].begin(), uniform.gpu[l].end(), true) == (l == 0 ? 3 : 2));
        std::int64_t least = INT64_MAX, most = 0;
        for (std::size_t e = 0; e < uniform.gpu[l].size(); ++e)
            (uniform.gpu[l][e] ? least = std::min(least, uniform.counts[l][e]) : most = std::max(most, uniform.counts[l][e]));
        BOOST_TEST(least >= most);
    }
    // Front-loading: the first layer fills up before the next gets any.
    const std::int64_t experts = freq.doc.at("experts_per_layer").to_number<std::int64_t>();
    const Placed front = run_plan(dir / "m", dir / "a.safetensors", experts + 1, "front-loading");
    BOOST_TEST(std::count(front.gpu[0].begin(), front.gpu[0].end(), true) == experts);
    BOOST_TEST(std::count(front.gpu[1].begin(), front.gpu[1].end(), true) == 1);
    // The coverage is the GPU experts' share of the counts.
    std::int64_t hit = 0;
    for (std::size_t e = 0; e < front.gpu[1].size(); ++e) hit += front.gpu[1][e] ? front.counts[1][e] : 0;
    BOOST_TEST(front.doc.at("layers").at(1).at("gpu_coverage").as_double() == static_cast<double>(hit) / (tokens * 2),
               boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_biased_expert_wins_every_token_and_the_gpu) {
    TempDir dir;
    auto s = run_moequant({"synth", "--family", "deepseek_v3", "--dtype", "bf16", "--out", (dir / "m").string(),
                           "--activations", (dir / "a.safetensors").string()});
    BOOST_REQUIRE_MESSAGE(s.exit_code == 0, s.err);
    rewrite(dir / "m", dir / "biased", [](const std::string& name, std::optional<Replacement>& r) {
        if (name != "model.layers.2.mlp.gate.e_score_correction_bias") return true;
        std::vector<float> bias(8, 0.0f);
        bias[6] = 100.0f;
        std::vector<std::uint8_t> bytes(bias.size() * 4);
        std::memcpy(bytes.data(), bias.data(), bytes.size());
        r = Replacement{{name, DType::F32, {8}}, std::move(bytes)};
        return true;
    });
    const Placed p = run_plan(dir / "biased", dir / "a.safetensors", 1, "frequency");
    const std::int64_t tokens = p.doc.at("calibration").at("tokens").to_number<std::int64_t>();
    BOOST_REQUIRE(p.counts.size() == 2u);  // MoE layers 1 and 2
    BOOST_TEST(p.counts[1][6] == tokens);
    BOOST_TEST(p.gpu[1][6]);
    BOOST_TEST(on_gpu(p) == 1);
}

BOOST_AUTO_TEST_CASE(bad_requests_fail_with_one_line) {
    TempDir dir;
    BOOST_REQUIRE(run_moequant({"synth", "--family", "mixtral", "--out", (dir / "m").string(), "--activations",
                                (dir / "a.safetensors").string()})
                      .exit_code == 0);
    auto plan = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {"plan", "--model_id", (dir / "m").string(), "--activations", (dir / "a.safetensors").string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_moequant(args);
    };
    auto too_many = plan({"--num-gpu-experts", "1000"});
    BOOST_TEST(too_many.exit_code == 2);
    BOOST_TEST(too_many.err.find("between 0 and the model's") != std::string::npos, too_many.err);
    BOOST_TEST(plan({}).exit_code == 2);  // no --num-gpu-experts
    BOOST_TEST(plan({"--num-gpu-experts", "2", "--strategy", "random"}).exit_code == 2);
    auto other = run_moequant({"plan", "--model_id", (dir / "m").string(), "--activations", (dir / "m" / "config.json").string(),
                               "--num-gpu-experts", "2"});
    BOOST_TEST(other.exit_code == 3, other.err);
    BOOST_TEST(!fs::exists(dir / "p.json"));
    auto written = plan({"--num-gpu-experts", "2", "--output", (dir / "p.json").string()});
    BOOST_TEST(written.exit_code == 0, written.err);
    BOOST_TEST(json::parse(read_text(dir / "p.json")).at("num_gpu_experts").to_number<int>() == 2);
}

BOOST_AUTO_TEST_SUITE_END()
