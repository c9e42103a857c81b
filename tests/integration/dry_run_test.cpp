// --dry-run (issue 18): it writes nothing, and the sizes it lists are the real run's, byte for
// byte, for every family and every output format (the run manifest, whose calibration counts
// come only from the run, within 2%); a run that will not fit is refused before its first
// layer (exit 5), as the dry run says it would be. A calibrated MOE_INT8 run (two block
// layouts through one quantizer) lists its real sizes too.
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <map>
#include <sstream>

using namespace moequant::test;

namespace {

// name -> bytes of the file lines of a dry run's listing ("  NAME   1,234 bytes[  note]").
std::map<std::string, std::uint64_t> listed_files(const std::string& out) {
    std::map<std::string, std::uint64_t> files;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
        if (!line.starts_with("  ")) continue;
        std::istringstream words(line);
        std::string name, bytes, unit;
        if (!(words >> name >> bytes >> unit) || unit != "bytes") continue;
        std::string digits;
        for (char c : bytes)
            if (c != ',') digits += c;
        files[name] = std::stoull(digits);
    }
    return files;
}

// Relative path -> size of every regular file under `dir`.
std::map<std::string, std::uint64_t> files_on_disk(const fs::path& dir) {
    std::map<std::string, std::uint64_t> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = e.file_size();
    return files;
}

// The dry run's listing against the real run's files: the same names, the same sizes.
void expect_same_files(const fs::path& out, const std::string& listing, const std::string& what) {
    auto listed = listed_files(listing);
    auto real = files_on_disk(out);
    BOOST_REQUIRE_MESSAGE(listed.count("moequant-run.json") && real.count("moequant-run.json"), what << "\n" << listing);
    const double manifest = static_cast<double>(listed["moequant-run.json"]), actual = static_cast<double>(real["moequant-run.json"]);
    BOOST_TEST(std::abs(manifest - actual) <= 0.02 * actual, what << ": manifest " << manifest << " vs " << actual);
    listed.erase("moequant-run.json");
    real.erase("moequant-run.json");
    BOOST_TEST((listed == real), what << "\n" << listing);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dry_run)

BOOST_AUTO_TEST_CASE(listed_sizes_are_the_real_runs_for_every_family_and_format) {
    struct Source {
        std::string family, dtype;
    };
    std::size_t compared = 0;
    for (const Source& s : {Source{"deepseek_v3", "fp8"}, {"kimi_k2", "int4-ct"}, {"qwen3_moe", "bf16"}, {"qwen3_next", "bf16"},
                            {"mixtral", "bf16"}, {"glm4_moe", "fp8-channel"}, {"minimax_m2", "fp8"}, {"deepseek_v4", "mxfp4"},
                            {"kimi_k26", "int4-ct"}}) {
        BOOST_TEST_CONTEXT(s.family << " " << s.dtype) {
            TempDir dir;
            const fs::path src = dir / "src";
            auto made = run_moequant({"synth", "--family", s.family, "--dtype", s.dtype, "--out", src.string()});
            BOOST_REQUIRE_MESSAGE(made.exit_code == 0, made.err);
            std::vector<std::vector<std::string>> jobs = {
                {"convert", "-i", src.string(), "--quant-method", "int4"},
                {"convert", "-i", src.string(), "--quant-method", "int8", "--no-merge-safetensor"},
                {"convert", "-i", src.string(), "--format", "bf16-safetensors"},
                {"gptq", "--model_id", src.string(), "--quant_method", "RTN", "--quant_type", "W4A16", "--torch_dtype", "float16"},
                {"gptq", "--model_id", src.string(), "--dataset", "embedded", "--num_calibration_samples", "4"},
            };
            if (s.family == "qwen3_moe")  // kt-kernel's backward weights, one more file pair per part
                jobs.push_back({"convert", "-i", src.string(), "--quant-method", "int4", "--save-backward-weights", "--no-merge-safetensor"});
            if (s.family == "deepseek_v4") jobs.resize(3);  // its experts' SwiGLU clamp: kt-kernel's AMX and CT refuse it
            int n = 0;
            for (auto args : jobs) {
                const fs::path out = dir / ("out" + std::to_string(n++));
                args.insert(args.end(), {args[0] == "gptq" ? "--output_dir" : "-o", out.string(), "-q"});
                auto dry_args = args;
                dry_args.push_back("--dry-run");
                auto dry = run_moequant(dry_args);
                if (s.family == "deepseek_v4" && dry.exit_code == 3) continue;  // the same refusal the real run gives
                BOOST_REQUIRE_MESSAGE(dry.exit_code == 0, args[0] << " " << args.back() << ": " << dry.err);
                BOOST_TEST(!fs::exists(out), "the dry run wrote " << out);
                BOOST_TEST(contains(dry.out, "dry run: nothing is written"));
                auto real = run_moequant(args);
                BOOST_REQUIRE_MESSAGE(real.exit_code == 0, real.err);
                expect_same_files(out, dry.out, args[0] + " " + args[4]);
                ++compared;
            }
        }
    }
    BOOST_TEST(compared >= 37u);  // 7 families x 5 jobs, and DeepSeek-V4's BF16 export and more
}

// The calibrated MOE_INT8 quantizer packs gate/up and down blocks through different variants:
// the dry run lists what each writes, merged and as the .kt tree.
BOOST_AUTO_TEST_CASE(a_calibrated_moe_int8_run_lists_its_real_sizes) {
    TempDir dir;
    const fs::path src = dir / "src";
    auto made = run_moequant({"synth", "--family", "qwen3_moe", "--dtype", "bf16", "--out", src.string()});
    BOOST_REQUIRE_MESSAGE(made.exit_code == 0, made.err);
    for (const bool tree : {false, true}) {
        const fs::path out = dir / (tree ? "tree" : "merged");
        std::vector<std::string> args = {"convert", "-i", src.string(), "--quant-method", "moe_int8", "--calibrate", "-o", out.string(), "-q"};
        args.insert(args.end(), small_calibration_dataset.begin(), small_calibration_dataset.end());
        if (tree) args.push_back("--no-merge-safetensor");
        auto dry_args = args;
        dry_args.push_back("--dry-run");
        auto dry = run_moequant(dry_args);
        BOOST_REQUIRE_MESSAGE(dry.exit_code == 0, dry.err);
        BOOST_TEST(!fs::exists(out));
        auto real = run_moequant(args);
        BOOST_REQUIRE_MESSAGE(real.exit_code == 0, real.err);
        expect_same_files(out, dry.out, tree ? "calibrated moe_int8 tree" : "calibrated moe_int8 merged");
    }
}

BOOST_AUTO_TEST_CASE(an_output_that_does_not_fit_is_refused_before_any_file) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out";
    BOOST_REQUIRE(run_moequant({"synth", "--family", "qwen3_moe", "--out", src.string()}).exit_code == 0);
    const std::vector<std::string> args = {"convert", "-i", src.string(), "-o", out.string(), "-q"};
    auto dry = run_moequant({"convert", "-i", src.string(), "-o", out.string(), "--dry-run"}, {"MOEQUANT_TEST_FREE_BYTES=100000"});
    BOOST_TEST(dry.exit_code == 5, dry.err);
    BOOST_TEST(contains(dry.out, "free at the output: 100,000 bytes (97.7 KiB): does not fit"), dry.out);
    BOOST_TEST(contains(dry.err, "NotEnoughDisk"), dry.err);
    auto refused = run_moequant(args, {"MOEQUANT_TEST_FREE_BYTES=100000"});
    BOOST_TEST(refused.exit_code == 5, refused.err);
    BOOST_TEST(contains(refused.err, "NotEnoughDisk"), refused.err);
    BOOST_TEST(!fs::exists(out), "a refused run left " << out);
    // A complete output to continue needs only what is not there yet.
    BOOST_REQUIRE(run_moequant(args).exit_code == 0);
    auto again = run_moequant(args, {"MOEQUANT_TEST_FREE_BYTES=100000"});
    BOOST_TEST(again.exit_code == 0, again.err);
    auto listing = run_moequant({"convert", "-i", src.string(), "-o", out.string(), "--dry-run"}, {"MOEQUANT_TEST_FREE_BYTES=100000"});
    BOOST_TEST(listing.exit_code == 0, listing.err);
    BOOST_TEST(contains(listing.out, "of them still to write"), listing.out);
}

BOOST_AUTO_TEST_SUITE_END()
