// convert --format gguf --calibrate --gptq (the gguf-gptq quantizer, docs/gguf-gptq.md): the
// GGUF of the importance-matrix conversion on the same recorded inputs — the same tensors in
// the same types — with the experts' codes chosen by GPTQ within the block scales of ggml's
// importance-weighted rounding. On trained-statistics models, measured on held-out text: every
// expert part's output error on the calibration inputs is at most plain rounding's (verify's
// check), the held-out sum is below the importance matrix's, and so is eval's KL, for Q4_K_M and
// the other grids (IQ4_XS, Q3_K_M, Q2_K). The bytes do not depend on the thread count; misuse
// fails with the usage code.

#include "gguf_container.hpp"
#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <moequant/engine/plugin_registry.hpp>
#include <moequant/error.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <map>

using namespace moequant;
using namespace moequant::formats;
using namespace moequant::test;
namespace json = boost::json;

namespace {

CommandResult gguf(const fs::path& model, const fs::path& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"convert", "-i", model.string(), "-o", out.string(), "--format", "gguf", "--quant-method", "Q4_K_M", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_moequant(args);
}

// Held-out text: the first 24 paragraphs (over 80 characters) of the GPL-3, which every Debian
// system has (base-files), as JSONL rows: about 4,100 tokens, enough for KL to rank the outputs
// steadily where four sentences did not.
fs::path held_out_text(const fs::path& dir) {
    const fs::path license = "/usr/share/common-licenses/GPL-3";
    BOOST_REQUIRE_MESSAGE(fs::exists(license), license << " (Debian's base-files) is missing");
    const std::string text = read_text(license);
    std::string rows;
    int kept = 0;
    for (std::size_t at = 0; at < text.size() && kept < 24;) {
        std::size_t end = text.find("\n\n", at);
        if (end == std::string::npos) end = text.size();
        std::string paragraph = text.substr(at, end - at);
        at = end + 2;
        std::string escaped;
        for (char c : paragraph) {
            if (c == '\n') c = ' ';
            if (c == '"' || c == '\\') escaped += '\\';
            escaped += c;
        }
        const std::size_t first = escaped.find_first_not_of(' '), last = escaped.find_last_not_of(' ');
        if (first == std::string::npos || last - first + 1 <= 80) continue;
        rows += "{\"text\": \"" + escaped.substr(first, last - first + 1) + "\"}\n";
        ++kept;
    }
    write_text(dir / "held_out.jsonl", rows);
    return dir / "held_out.jsonl";
}

// The MoE inputs of the unquantized model on `dataset` (embedded, or a JSONL file).
fs::path recorded_inputs(const fs::path& model, const std::string& dataset, const fs::path& file) {
    auto r = run_moequant({"record", "--model_id", model.string(), "--dataset", dataset, "--output", file.string(), "-q"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return file;
}

// verify's report on recorded inputs, each expert measured on its routed tokens.
CommandResult verify_on(const fs::path& model, const fs::path& out, const fs::path& inputs) {
    return run_moequant({"verify", "--source", model.string(), "--converted", out.string(), "--calibration-activations", inputs.string(),
                         "--routed-only", "--json", "-q"});
}

double summed(const CommandResult& report, const char* key) {
    double sum = 0;
    std::size_t parts = 0;
    const json::value parsed = json::parse(report.out);
    BOOST_REQUIRE_MESSAGE(parsed.is_object(), report.out + report.err);
    for (const auto& t : parsed.at("tensors").as_array()) {
        sum += t.as_object().at(key).to_number<double>();
        ++parts;
    }
    BOOST_TEST(parts > 0u);
    return sum;
}

// Every tensor of every GGUF file in `dir`: name -> ggml type.
std::map<std::string, std::uint32_t> tensor_types(const fs::path& dir) {
    std::map<std::string, std::uint32_t> types;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.path().extension() == ".gguf")
            for (const auto& t : read_gguf_file_header(entry.path().string()).tensors) types[t.name] = t.type;
    return types;
}

double eval_kl(const fs::path& model, const fs::path& cpu_weights, const fs::path& dataset) {
    auto r = run_moequant({"eval", "--model_id", model.string(), "--cpu-weights", cpu_weights.string(), "--dataset", dataset.string(), "--json", "-q"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out).as_object().at("kl_mean").to_number<double>();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_gptq)

// Trained-statistics models (correlated inputs, as calibration meets them) calibrated on the
// embedded text's recorded inputs, measured on held-out text.
BOOST_AUTO_TEST_CASE(gptq_codes_cost_less_than_the_importance_matrix_rounding_on_held_out_text) {
    for (const auto& [family, dtype] : std::vector<std::pair<std::string, std::string>>{{"qwen3_moe", "bf16"}, {"deepseek_v3", "fp8"}}) {
        BOOST_TEST_CONTEXT(family) {
            TempDir dir;
            const fs::path model = dir / "model";
            auto synth = run_moequant({"synth", "--family", family, "--dtype", dtype, "--statistics", "trained", "--out", model.string()});
            BOOST_REQUIRE_MESSAGE(synth.exit_code == 0, synth.err);
            const fs::path text = held_out_text(dir.path());
            const fs::path inputs = recorded_inputs(model, "embedded", dir / "inputs.safetensors");
            const fs::path held_out = recorded_inputs(model, text.string(), dir / "held_out.safetensors");
            auto imatrix = gguf(model, dir / "imatrix", {"--calibrate", "--calibration-activations", inputs.string()});
            BOOST_REQUIRE_MESSAGE(imatrix.exit_code == 0, imatrix.err);
            auto gptq = gguf(model, dir / "gptq", {"--calibrate", "--gptq", "--calibration-activations", inputs.string()});
            BOOST_REQUIRE_MESSAGE(gptq.exit_code == 0, gptq.err);
            BOOST_TEST((tensor_types(dir / "gptq") == tensor_types(dir / "imatrix")));

            // On the calibration inputs every part is at most plain rounding's error (verify's rule).
            const CommandResult calibrated = verify_on(model, dir / "gptq", inputs);
            BOOST_TEST(calibrated.exit_code == 0, calibrated.out << calibrated.err);
            const CommandResult gptq_held = verify_on(model, dir / "gptq", held_out), imatrix_held = verify_on(model, dir / "imatrix", held_out);
            BOOST_REQUIRE(imatrix_held.exit_code == 0);
            const double gptq_error = summed(gptq_held, "output_error"), imatrix_error = summed(imatrix_held, "output_error");
            const double plain_error = summed(gptq_held, "reference_output_error");
            BOOST_TEST_MESSAGE(family << ": held-out summed relative output error: plain " << plain_error << ", importance matrix "
                                      << imatrix_error << ", gptq " << gptq_error);
            BOOST_TEST(gptq_error < imatrix_error);
            BOOST_TEST(imatrix_error < plain_error);
            const double gptq_kl = eval_kl(model, dir / "gptq", text), imatrix_kl = eval_kl(model, dir / "imatrix", text);
            BOOST_TEST_MESSAGE(family << ": held-out KL: importance matrix " << imatrix_kl << ", gptq " << gptq_kl);
            BOOST_TEST(gptq_kl < imatrix_kl);
        }
    }
}

// The other grids: IQ4's table, Q3_K's signed 3-bit codes, Q2_K's 2-bit ones with minimums.
BOOST_AUTO_TEST_CASE(every_grid_gains_on_held_out_text) {
    TempDir dir;
    const fs::path model = dir / "model";
    auto synth = run_moequant({"synth", "--family", "qwen3_moe", "--statistics", "trained", "--out", model.string()});
    BOOST_REQUIRE_MESSAGE(synth.exit_code == 0, synth.err);
    const fs::path text = held_out_text(dir.path());
    const fs::path inputs = recorded_inputs(model, "embedded", dir / "inputs.safetensors");
    for (const std::string preset : {"IQ4_XS", "Q3_K_M", "Q2_K"}) {
        BOOST_TEST_CONTEXT(preset) {
            std::map<std::string, double> kl;
            for (const std::string mode : {"imatrix", "gptq"}) {
                std::vector<std::string> args = {"convert", "-i", model.string(), "-o", (dir / (preset + mode)).string(), "--format", "gguf",
                                                 "--quant-method", preset, "--quiet", "--calibrate", "--calibration-activations", inputs.string()};
                if (mode == "gptq") args.push_back("--gptq");
                auto r = run_moequant(args);
                BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
                kl[mode] = eval_kl(model, dir / (preset + mode), text);
            }
            BOOST_TEST_MESSAGE(preset << ": held-out KL: importance matrix " << kl["imatrix"] << ", gptq " << kl["gptq"]);
            BOOST_TEST(kl["gptq"] < kl["imatrix"]);
        }
    }
}

BOOST_AUTO_TEST_CASE(the_bytes_do_not_depend_on_the_thread_count) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    const fs::path inputs = recorded_inputs(model, "embedded", dir / "inputs.safetensors");
    for (const char* threads : {"1", "3"}) {
        auto r = gguf(model, dir / threads, {"--calibrate", "--gptq", "--calibration-activations", inputs.string(), "--threads", threads});
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    }
    BOOST_TEST(file_hashes(dir / "1") == file_hashes(dir / "3"));
}

BOOST_AUTO_TEST_CASE(misuse_fails_with_the_usage_code) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    auto no_data = gguf(model, dir / "a", {"--gptq"});
    BOOST_TEST(no_data.exit_code == 2, no_data.err);
    BOOST_TEST(contains(no_data.err, "--gptq chooses the codes on calibration data"), no_data.err);
    auto not_gguf = run_moequant({"convert", "-i", model.string(), "-o", (dir / "b").string(), "--gptq"});
    BOOST_TEST(not_gguf.exit_code == 2, not_gguf.err);
    BOOST_TEST(contains(not_gguf.err, "are options of --format gguf"), not_gguf.err);
    // An MXFP4 source's carried experts have no codes to choose (no family with an MXFP4 source
    // calibrates today; the mixture refuses the combination itself).
    Registry registry;
    registry.load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / "moequant-quantizer-ggml_quants.so", PluginOrigin::explicit_file);
    const Quantizer* mixture = registry.quantizer("gguf-gptq");
    BOOST_REQUIRE(mixture != nullptr);
    BOOST_TEST(mixture->calibration() != nullptr);
    BOOST_TEST(registry.quantizer("gguf")->calibration() == nullptr);
    try {
        mixture->configure(Options{{"gguf.expert_types", "0:mxfp4,mxfp4,mxfp4"}, {"gguf.carry", "mxfp4"}});
        BOOST_ERROR("the carried mixture was configured");
    } catch (const Error& e) {
        BOOST_TEST((e.kind() == ErrorKind::usage));
        BOOST_TEST(contains(e.what(), "keep their stored codes"), e.what());
    }
    for (const char* out : {"a", "b"}) BOOST_TEST(!fs::exists(dir / out / "moequant-run.json"), out);
}

BOOST_AUTO_TEST_SUITE_END()
