// The small Mixtral trained on real text (tests/data/trained/mixtral-tiny, made by
// scripts/trained-model): moequant's forward gives the trainer's own validation perplexity, and
// what quantization costs orders as it does on released models — INT8 below INT4, GGUF's
// importance-weighted Q4_K_M below plain Q4_K_M and GPTQ's codes below both — measured by eval's
// KL on held-out paragraphs the training never saw.
#include "test_support.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>
#include <string>

using namespace moequant::test;

namespace {

const fs::path model_dir = fs::path(MOEQUANT_SOURCE_DIR) / "tests/data/trained/mixtral-tiny";
constexpr int rows = 32;  // the first held-out paragraphs: a few thousand tokens

// The first `rows` lines of the model's heldout.jsonl, as their own dataset.
fs::path first_rows(const TempDir& dir) {
    std::ifstream in(model_dir / "heldout.jsonl");
    std::ofstream out(dir / "heldout.jsonl");
    std::string line;
    for (int i = 0; i < rows && std::getline(in, line); ++i) out << line << '\n';
    return dir / "heldout.jsonl";
}

boost::json::object eval(const fs::path& dataset, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"eval", "--model_id", model_dir.string(), "--dataset", dataset.string(), "--num_calibration_samples",
                                     std::to_string(rows), "--max_sequence_length", "256", "--json", "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return boost::json::parse(r.out).as_object();
}

double kl_of(const fs::path& dataset, const fs::path& cpu_weights) {
    return eval(dataset, {"--cpu-weights", cpu_weights.string()}).at("kl_mean").to_number<double>();
}

void convert(const std::vector<std::string>& extra, const fs::path& out) {
    std::vector<std::string> args = {"convert", "-i", model_dir.string(), "-o", out.string(), "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trained_model)

BOOST_AUTO_TEST_CASE(moequant_forward_gives_the_trainers_validation_perplexity) {
    TempDir dir;
    const auto training = boost::json::parse(read_text(model_dir / "training.json")).as_object();
    const double want = training.at("validation").at("subsets").at(std::to_string(rows)).at("perplexity_bf16").to_number<double>();
    const double got = eval(first_rows(dir)).at("perplexity_source").to_number<double>();
    BOOST_TEST(std::abs(got - want) / want < 1e-4, "moequant " << got << ", trainer " << want);
    // A trained model: far below the vocabulary's 32000.
    BOOST_TEST(got < 1000.0);
}

BOOST_AUTO_TEST_CASE(quantization_costs_order_as_on_released_models) {
    TempDir dir;
    const fs::path held = first_rows(dir);
    convert({"--quant-method", "int4"}, dir / "int4");
    convert({"--quant-method", "int8"}, dir / "int8");
    const double int4 = kl_of(held, dir / "int4"), int8 = kl_of(held, dir / "int8");
    BOOST_TEST(int8 < int4, "AMX INT8 " << int8 << ", INT4 " << int4);
    // Q4_K_M of the experts (every other tensor BF16, as the KL then measures the experts' codes):
    // plain, with the importance matrix of the embedded text, with GPTQ's codes on it.
    const std::vector<std::string> q4 = {"--format", "gguf", "--quant-method", "Q4_K_M", "--tensor-type", "^(?!.*_exps\\.).*=bf16"};
    auto with = [&](std::vector<std::string> more) {
        std::vector<std::string> args = q4;
        args.insert(args.end(), more.begin(), more.end());
        return args;
    };
    convert(q4, dir / "plain");
    convert(with({"--calibrate", "--dataset", "embedded"}), dir / "imatrix");
    convert(with({"--calibrate", "--dataset", "embedded", "--gptq"}), dir / "gptq");
    const double plain = kl_of(held, dir / "plain"), imatrix = kl_of(held, dir / "imatrix"), gptq = kl_of(held, dir / "gptq");
    BOOST_TEST(imatrix < plain, "imatrix " << imatrix << ", plain " << plain);
    BOOST_TEST(gptq < imatrix, "GPTQ " << gptq << ", imatrix " << imatrix);
    // Calibrated AMX INT4 below plain AMX INT4, GPTQ W4A16 below RTN.
    convert({"--quant-method", "int4", "--calibrate", "--dataset", "embedded"}, dir / "int4-cal");
    const double calibrated = kl_of(held, dir / "int4-cal");
    BOOST_TEST(calibrated < int4, "calibrated AMX INT4 " << calibrated << ", plain " << int4);
    auto gpu = [&](std::vector<std::string> method, const fs::path& out) {
        std::vector<std::string> args = {"gptq", "--model_id", model_dir.string(), "--output_dir", out.string(), "--quant_type", "W4A16", "-q"};
        args.insert(args.end(), method.begin(), method.end());
        auto r = run_moequant(args);
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return eval(held, {"--gpu-weights", out.string()}).at("kl_mean").to_number<double>();
    };
    const double rtn = gpu({"--quant_method", "RTN"}, dir / "rtn"), w4 = gpu({"--dataset", "embedded"}, dir / "w4");
    BOOST_TEST(w4 < rtn, "GPTQ W4A16 " << w4 << ", RTN " << rtn);
}

// `moequant hybrid` on the trained model: the most used experts its budget holds on the GPU,
// both outputs verified, eval of the hybrid on the model's own held-out rows (its heldout.jsonl,
// the default), and a launch line naming the files.
BOOST_AUTO_TEST_CASE(hybrid_prepares_the_trained_model) {
    TempDir dir;
    // 18 MiB: the 16.8 MiB outside the routed experts (the 32000-token embedding) and 4 of the 8
    // experts of each layer.
    auto r = run_moequant({"hybrid", "--model_id", model_dir.string(), "--output", (dir / "run").string(), "--gpu-memory", "18MiB",
                           "--dataset", "embedded", "--eval-samples", std::to_string(rows), "--eval-max-length", "256"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto state = boost::json::parse(read_text(dir / "run/hybrid.json")).as_object();
    BOOST_TEST(state.at("gpu_experts_per_layer").to_number<std::int64_t>() == 4);
    BOOST_TEST(state.at("eval").at("dataset").as_string() == (model_dir / "heldout.jsonl").string());
    const double kl = state.at("eval").at("kl_mean").to_number<double>();
    BOOST_TEST((kl > 0 && kl < 1e-3), kl);
    BOOST_TEST(contains(r.err, "[5/7] verify the GPU checkpoint: passed"), r.err);
    BOOST_TEST(contains(r.err, "[6/7] verify the CPU experts: passed"), r.err);
    for (const char* file : {"gpu/config.json", "cpu/model.safetensors.index.json", "activation_stats.pt", "placement.json", "eval.json"})
        BOOST_TEST(fs::exists(dir / "run" / file), file);
    BOOST_TEST(contains(r.out, "--kt-num-gpu-experts 4"), r.out);
}

BOOST_AUTO_TEST_SUITE_END()
