// `convert --calibrate` end to end (amx-int4-gptq / amx-int8-gptq, and moe-int8-gptq for
// --quant-method moe_int8): the output keeps kt-kernel's layout and method, loads through the
// same readers (verify, eval), records that it is calibrated and on what data; on four families'
// forward shapes its KL is below plain AMXINT4's on the calibration text (MOE_INT8: below plain
// MOE_INT8's, its .kt tree holding the same files as plain's); with threadpool parts and recorded activations every part's
// output error is at most plain AMX's; the bytes do not depend on the thread count; misuse
// fails with the usage exit code before any work.

#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <moequant/safetensors_reader.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <map>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

CommandResult convert(const fs::path& model, const fs::path& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"convert", "-i", model.string(), "-o", out.string(), "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_moequant(args);
}

fs::path calibrated(const fs::path& model, const fs::path& out, std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), "--calibrate");
    extra.insert(extra.end(), small_calibration_dataset.begin(), small_calibration_dataset.end());
    auto r = convert(model, out, extra);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return out;
}

double eval_kl(const fs::path& model, const fs::path& cpu_weights) {
    std::vector<std::string> args = {"eval", "--model_id", model.string(), "--cpu-weights", cpu_weights.string(), "--json", "-q"};
    args.insert(args.end(), small_calibration_dataset.begin(), small_calibration_dataset.end());
    auto r = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out).as_object().at("kl_mean").to_number<double>();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(calibrated_amx)

BOOST_AUTO_TEST_CASE(calibrated_int4_costs_less_kl_than_plain_int4_and_passes_verify) {
    const std::vector<std::pair<std::string, std::string>> families = {
        {"qwen3_moe", "bf16"}, {"deepseek_v3", "fp8"}, {"qwen3_next", "bf16"}, {"minimax_m2", "fp8"}};
    for (const auto& [family, dtype] : families) {
        BOOST_TEST_CONTEXT(family) {
            TempDir dir;
            const fs::path model = synth_checkpoint_in(dir, family, dtype);
            auto plain = convert(model, dir / "plain", {"--quant-method", "int4"});
            BOOST_REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
            const fs::path cal = calibrated(model, dir / "cal");
            const double plain_kl = eval_kl(model, dir / "plain"), cal_kl = eval_kl(model, cal);
            BOOST_TEST(cal_kl > 0.0);
            BOOST_TEST(cal_kl < plain_kl);
            auto v = run_moequant({"verify", "--source", model.string(), "--converted", cal.string()});
            BOOST_TEST(v.exit_code == 0, v.out + v.err);
            BOOST_TEST(contains(v.out, "output of amx-int4-gptq"), v.out);
            BOOST_TEST(contains(v.out, "per-element error bounds do not apply"), v.out);
        }
    }
}

BOOST_AUTO_TEST_CASE(calibrated_moe_int8_costs_less_kl_than_plain_moe_int8_in_the_same_files) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    auto plain = convert(model, dir / "plain", {"--quant-method", "moe_int8"});
    BOOST_REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
    const fs::path cal = calibrated(model, dir / "cal", {"--quant-method", "moe_int8"});
    const double plain_kl = eval_kl(model, dir / "plain"), cal_kl = eval_kl(model, cal);
    BOOST_TEST_MESSAGE("MOE_INT8 KL: plain " << plain_kl << ", calibrated " << cal_kl);
    BOOST_TEST(cal_kl > 0.0);
    BOOST_TEST(cal_kl < plain_kl);
    // The .kt tree: kt's names and sizes, as plain MOE_INT8 writes them (the layout is unchanged).
    auto plain_tree = convert(model, dir / "plain-tree", {"--quant-method", "moe_int8", "--no-merge-safetensor"});
    BOOST_REQUIRE_MESSAGE(plain_tree.exit_code == 0, plain_tree.err);
    const fs::path tree = calibrated(model, dir / "tree", {"--quant-method", "moe_int8", "--no-merge-safetensor"});
    auto sizes = [](const fs::path& folder) {
        std::map<std::string, std::uintmax_t> files;
        for (const auto& e : fs::recursive_directory_iterator(folder))
            if (e.is_regular_file() && e.path().extension() == ".kt") files[fs::relative(e.path(), folder).string()] = e.file_size();
        return files;
    };
    BOOST_TEST(!sizes(tree).empty());
    BOOST_TEST((sizes(tree) == sizes(dir / "plain-tree")));
    BOOST_TEST((file_hashes(tree) != file_hashes(dir / "plain-tree")));  // other codes, other bytes
    for (const fs::path& output : {cal, tree}) {
        BOOST_TEST_CONTEXT(output.filename()) {
            auto v = run_moequant({"verify", "--source", model.string(), "--converted", output.string()});
            BOOST_TEST(v.exit_code == 0, v.out + v.err);
            BOOST_TEST(contains(v.out, "output of moe-int8-gptq"), v.out);
        }
    }
    // kt's script skips the backward weights of MOE_INT8 with a warning; so does the calibrated
    // run (not --quiet, which silences the warning).
    std::vector<std::string> backward = {"convert", "-i", model.string(), "-o", (dir / "backward").string(), "--calibrate",
                                         "--quant-method", "moe_int8", "--save-backward-weights"};
    backward.insert(backward.end(), small_calibration_dataset.begin(), small_calibration_dataset.end());
    auto skipped = run_moequant(backward);
    BOOST_TEST(skipped.exit_code == 0, skipped.err);
    BOOST_TEST(contains(skipped.err, "--save-backward-weights: MOE_INT8 has no SFT method"), skipped.err);
}

BOOST_AUTO_TEST_CASE(the_output_records_its_method_quantizer_and_data) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    const fs::path cal = calibrated(model, dir / "cal", {"--quant-method", "int8"});
    bool found = false;
    for (const auto& entry : fs::directory_iterator(cal)) {
        if (entry.path().extension() != ".safetensors") continue;
        const SafetensorsFile shard = SafetensorsFile::open(entry.path());
        if (!shard.metadata("moequant.layer")) continue;  // the non-expert shard
        found = true;
        BOOST_TEST(shard.metadata("moequant.method").value_or("") == "AMXINT8");  // what kt-kernel reads
        BOOST_TEST(shard.metadata("moequant.quantizer").value_or("") == "amx-int8-gptq");
        BOOST_TEST(shard.metadata("moequant.quantizer.calibration").value_or("") == "gptq");
        const std::string data = shard.metadata("moequant.calibration").value_or("");
        BOOST_TEST(contains(data, "text embedded (sequential:"), data);
        BOOST_TEST(contains(data, "4 samples"), data);
    }
    BOOST_TEST(found);
    const std::string manifest = read_text(cal / "moequant-run.json");
    BOOST_TEST(contains(manifest, "\"amx-int8-gptq\""));
    BOOST_TEST(contains(manifest, "sequential:"));
    BOOST_TEST(contains(manifest, "tokens_per_expert"));
}

// A .kt tree in two threadpool parts, calibrated on the same text whose MoE inputs it saves:
// verify then measures each part's output error on those inputs against plain AMXINT4's.
BOOST_AUTO_TEST_CASE(each_part_of_a_multi_part_tree_has_at_most_plain_amx_output_error) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "deepseek_v3", "fp8");
    const fs::path activations = dir / "inputs.safetensors";
    calibrated(model, dir / "tree", {"--no-merge-safetensor", "--threadpool-count", "2", "--save-activations", activations.string()});
    auto v = run_moequant({"verify", "--source", model.string(), "--converted", (dir / "tree").string(), "--calibration-activations",
                           activations.string(), "--json"});
    BOOST_REQUIRE_MESSAGE(v.exit_code == 0, v.out + v.err);
    const json::object report = json::parse(v.out).as_object();
    std::size_t measured = 0, parts_seen[2] = {0, 0};
    for (const auto& t : report.at("tensors").as_array()) {
        const json::object& part = t.as_object();
        const double error = part.at("output_error").to_number<double>();
        const double reference = part.at("reference_output_error").to_number<double>();
        BOOST_TEST(error <= reference);
        BOOST_TEST(error > 0.0);
        ++measured;
        ++parts_seen[part.at("part").to_number<int>()];
    }
    BOOST_TEST(measured > 0u);
    BOOST_TEST(parts_seen[0] == parts_seen[1]);
    // The same output through eval's reader, parts joined back into whole matrices.
    BOOST_TEST(eval_kl(model, dir / "tree") > 0.0);
}

BOOST_AUTO_TEST_CASE(the_bytes_do_not_depend_on_the_thread_count) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    calibrated(model, dir / "one", {"--threads", "1"});
    calibrated(model, dir / "four", {"--threads", "4"});
    BOOST_TEST(file_hashes(dir / "one") == file_hashes(dir / "four"));
}

BOOST_AUTO_TEST_CASE(misuse_fails_with_the_usage_code_before_any_work) {
    TempDir dir;
    const fs::path model = synth_checkpoint_in(dir, "qwen3_moe", "bf16");
    auto refused = [&](std::vector<std::string> extra, const std::string& reason) {
        auto r = convert(model, dir / "out", extra);
        BOOST_TEST(r.exit_code == 2);
        BOOST_TEST(contains(r.err, reason), r.err);
        BOOST_TEST(!fs::exists(dir / "out"));
    };
    refused({"--calibrate"}, "--calibrate needs calibration data");
    refused(small_calibration_dataset, "calibration data is used only with --calibrate");
    std::vector<std::string> plain_quantizer = {"--calibrate", "--quantizer", "amx-int4"};
    plain_quantizer.insert(plain_quantizer.end(), small_calibration_dataset.begin(), small_calibration_dataset.end());
    refused(plain_quantizer, "does not calibrate");
    std::vector<std::string> no_quantizer = {"--calibrate", "--format", "bf16-safetensors"};
    no_quantizer.insert(no_quantizer.end(), small_calibration_dataset.begin(), small_calibration_dataset.end());
    refused(no_quantizer, "nothing to calibrate");
    refused({"--quantizer", "amx-int4-gptq"}, "chooses its codes on calibration data");
    refused({"--calibrate", "--dataset", "embedded", "--calibration-activations", "x.safetensors"}, "not both");
}

BOOST_AUTO_TEST_SUITE_END()
