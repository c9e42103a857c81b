// `--compute-dtype bf16|f32` (calibration's matrix products, compute_dtype.hpp) end to end: GPTQ
// calibrated on text through either path, or on recorded activations with either Hessian,
// passes verify on the inputs it calibrated on (GPTQ's output error below RTN's on every part);
// the two text paths give different bytes, each the same on one thread as on two; the run
// manifest records the dtype, so a rerun in the other one is another job; bad values are usage
// errors.
#include "bf16_products_here.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace moequant;
using namespace moequant::test;

BOOST_AUTO_TEST_SUITE(calibration_products)

BOOST_AUTO_TEST_CASE(gptq_through_bf16_and_f32_products_verifies_below_rtn, *boost::unit_test::precondition(test::bf16_products_here)) {
    TempDir dir;
    const fs::path src = dir / "src";
    auto synth = run_moequant({"synth", "--family", "deepseek_v3", "--out", src.string()});
    BOOST_REQUIRE_MESSAGE(synth.exit_code == 0, synth.err);
    std::map<std::string, std::map<std::string, std::string>> hashes;
    for (const std::string dtype : {"f32", "bf16"})
        for (const std::string threads : {"2", "1"}) {
            BOOST_TEST_CONTEXT(dtype << " on " << threads << " thread(s)") {
                const fs::path out = dir / (dtype + threads), acts = dir / (dtype + threads + ".safetensors");
                const auto r = run_moequant({"gptq", "--model_id", src.string(), "--output_dir", out.string(), "--dataset", "embedded",
                                             "--quant_type", "W4A16", "--compute-dtype", dtype, "--threads", threads,
                                             "--save-activations", acts.string()});
                BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
                BOOST_TEST(contains(r.err, dtype == "bf16" ? "products in BF16 with FP32 accumulation (oneDNN, " : "products in FP32"), r.err);
                BOOST_TEST(contains(read_text(out / "moequant-run.json"), "\"calibration.products\":\"" + dtype + "\""));
                hashes[dtype][threads] = sha256_file(out / "model-00001-of-00003.safetensors");
                if (threads == "1") continue;
                const auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string(), "--quiet",
                                             "--calibration-activations", acts.string()});
                BOOST_TEST(v.exit_code == 0, v.out << v.err);
                BOOST_TEST(contains(v.out, "PASSED"), v.out);
            }
        }
    BOOST_TEST(hashes["bf16"]["1"] == hashes["bf16"]["2"]);
    BOOST_TEST(hashes["f32"]["1"] == hashes["f32"]["2"]);
    BOOST_TEST(hashes["bf16"]["2"] != hashes["f32"]["2"]);
    // Recorded activations: the Hessians of BF16 inputs as BF16 products (exact), or FP32.
    const fs::path recorded = dir / "recorded.safetensors";
    BOOST_REQUIRE(run_moequant({"record", "--model_id", src.string(), "--dataset", "embedded", "--output", recorded.string(),
                                "--quiet"}).exit_code == 0);
    for (const std::string dtype : {"bf16", "f32"}) {
        BOOST_TEST_CONTEXT("recorded, " << dtype) {
            const fs::path out = dir / ("recorded-" + dtype);
            const auto r = run_moequant({"gptq", "--model_id", src.string(), "--output_dir", out.string(), "--quant_type", "W4A16",
                                         "--calibration-activations", recorded.string(), "--compute-dtype", dtype});
            BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            BOOST_TEST(contains(read_text(out / "moequant-run.json"), "\"calibration.products\":\"" + dtype + "\""));
            const auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string(), "--quiet",
                                         "--calibration-activations", recorded.string()});
            BOOST_TEST(v.exit_code == 0, v.out << v.err);
        }
    }
    // A rerun in the same dtype finds its own output; in the other dtype it is another job,
    // refused without --overwrite.
    auto rerun = [&](const std::string& dtype) {
        return run_moequant({"gptq", "--model_id", src.string(), "--output_dir", (dir / "rerun").string(), "--dataset", "embedded",
                             "--quant_type", "W4A16", "--compute-dtype", dtype, "--quiet"});
    };
    BOOST_REQUIRE(rerun("bf16").exit_code == 0);
    const auto same = rerun("bf16");
    BOOST_TEST(same.exit_code == 0, same.err);
    const auto other = rerun("f32");
    BOOST_TEST(other.exit_code == 5, other.err);
    BOOST_TEST(contains(other.err, "OutputExists"), other.err);
}

BOOST_AUTO_TEST_CASE(compute_dtype_misuse_is_a_usage_error, *boost::unit_test::precondition(test::bf16_products_here)) {
    TempDir dir;
    const fs::path src = dir / "src";
    BOOST_REQUIRE(run_moequant({"synth", "--family", "qwen3_moe", "--out", src.string()}).exit_code == 0);
    const std::string out = (dir / "o").string();
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"gptq", "--model_id", src.string(), "--output_dir", out, "--dataset", "embedded", "--compute-dtype", "fp8"},
             {"gptq", "--model_id", src.string(), "--output_dir", out, "--quant_method", "RTN", "--compute-dtype", "bf16"},
             {"record", "--model_id", src.string(), "--dataset", "embedded", "--output", out + ".safetensors", "--compute-dtype", "f16"},
             {"eval", "--model_id", src.string(), "--dataset", "embedded", "--compute-dtype", "int8"}}) {
        BOOST_TEST_CONTEXT(args[0] << " " << args.back()) {
            const auto r = run_moequant(args);
            BOOST_TEST(r.exit_code == 2, r.err);
            BOOST_TEST(contains(r.err, "--compute-dtype"), r.err);
            BOOST_TEST(!fs::exists(out));
            BOOST_TEST(!fs::exists(out + ".safetensors"));
        }
    }
    // record and eval take it too.
    const auto rec = run_moequant({"record", "--model_id", src.string(), "--dataset", "embedded", "--output",
                                   (dir / "a.safetensors").string(), "--compute-dtype", "bf16"});
    BOOST_TEST(rec.exit_code == 0, rec.err);
    BOOST_TEST(contains(rec.err, "products in BF16"), rec.err);
    const auto ev = run_moequant({"eval", "--model_id", src.string(), "--dataset", "embedded", "--num_calibration_samples", "2",
                                  "--compute-dtype", "bf16"});
    BOOST_TEST(ev.exit_code == 0, ev.err);
    BOOST_TEST(contains(ev.err, "products in BF16"), ev.err);
}

BOOST_AUTO_TEST_SUITE_END()
