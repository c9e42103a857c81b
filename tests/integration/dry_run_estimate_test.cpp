// --dry-run's peak memory (issue 18): within a quarter of the real run's peak resident memory
// (the child's ru_maxrss) for convert, gptq and eval on every family's small preset, and a
// time estimate printed beside it. Not run in the sanitizer build: ASan's shadow memory and
// quarantine change what a process holds.
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <sstream>

using namespace moequant::test;

namespace {

// N of "peak memory: about N bytes", 0 when absent.
std::uint64_t estimated_peak(const std::string& out) {
    const std::string key = "peak memory: about ";
    const auto at = out.find(key);
    if (at == std::string::npos) return 0;
    std::string digits;
    for (std::size_t i = at + key.size(); i < out.size() && (std::isdigit(static_cast<unsigned char>(out[i])) || out[i] == ','); ++i)
        if (out[i] != ',') digits += out[i];
    return digits.empty() ? 0 : std::stoull(digits);
}

struct Job {
    std::string what;
    std::vector<std::string> args;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(dry_run_estimate)

BOOST_AUTO_TEST_CASE(peak_memory_is_within_a_quarter_of_the_real_runs_on_every_small_preset) {
    struct Family {
        std::string name, dtype;
        bool forward = true;  // calibration and eval run on it
    };
    std::size_t compared = 0;
    for (const Family& f : {Family{"deepseek_v3", "bf16"}, {"qwen3_moe", "bf16"}, {"qwen3_next", "bf16"}, {"mixtral", "bf16"},
                            {"glm4_moe", "bf16"}, {"minimax_m2", "bf16"}, {"deepseek_v4", "bf16", false}, {"gpt_oss", "mxfp4", false}}) {
        BOOST_TEST_CONTEXT(f.name) {
            TempDir dir;
            const std::string src = (dir / "src").string(), kt = (dir / "kt").string(), ct = (dir / "ct").string();
            const auto made = run_moequant({"synth", "--family", f.name, "--preset", "small", "--dtype", f.dtype, "--out", src});
            BOOST_REQUIRE_MESSAGE(made.exit_code == 0, made.err);
            std::vector<Job> jobs;
            if (f.name == "gpt_oss")  // only the BF16 export holds its expert biases
                jobs.push_back({"convert bf16", {"convert", "-i", src, "-o", kt, "--format", "bf16-safetensors"}});
            else
                jobs.push_back({"convert int4", {"convert", "-i", src, "-o", kt, "--quant-method", "int4"}});
            if (f.forward) {
                jobs.push_back({"gptq", {"gptq", "--model_id", src, "--output_dir", ct, "--quant_type", "W4A16", "--dataset", "embedded"}});
                jobs.push_back({"eval", {"eval", "--model_id", src, "--dataset", "embedded", "--gpu-weights", ct}});
            } else if (f.name == "deepseek_v4") {  // no forward: its gptq is RTN
                jobs.push_back({"gptq rtn", {"gptq", "--model_id", src, "--output_dir", ct, "--quant_method", "RTN", "--quant_type", "W4A16"}});
            }

            for (const Job& job : jobs) {
                auto dry_args = job.args;
                dry_args.push_back("--dry-run");
                const auto dry = run_moequant(dry_args);
                BOOST_REQUIRE_MESSAGE(dry.exit_code == 0, job.what << ": " << dry.err);
                BOOST_TEST(dry.out.find("\ntime: about ") != std::string::npos, job.what << "\n" << dry.out);
                const std::uint64_t estimate = estimated_peak(dry.out);
                BOOST_REQUIRE_MESSAGE(estimate > 0, job.what << "\n" << dry.out);
                const auto real = run_moequant(job.args);
                BOOST_REQUIRE_MESSAGE(real.exit_code == 0, job.what << ": " << real.err);
                BOOST_REQUIRE(real.peak_resident_bytes > 0);
                const double ratio = static_cast<double>(estimate) / static_cast<double>(real.peak_resident_bytes);
                BOOST_TEST_MESSAGE(f.name << " " << job.what << ": estimated " << estimate << ", measured " << real.peak_resident_bytes
                                          << " (" << ratio << ")");
                BOOST_TEST(std::abs(ratio - 1) <= 0.25, job.what << ": estimated " << estimate << " bytes, measured "
                                                                 << real.peak_resident_bytes << "\n" << dry.out);
                ++compared;
            }
        }
    }
    BOOST_TEST(compared == 21u);  // 6 families x 3 commands, DeepSeek-V4's convert and RTN, gpt-oss's export
}

BOOST_AUTO_TEST_SUITE_END()
