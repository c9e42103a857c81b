// Calibrated AMX experts (`convert --calibrate`, issue 17) against plain AMXINT4, on a
// synthesized model of each family, measured on held-out text: the embedded text's paragraphs
// split in two, even ones for calibration and odd ones for `eval`. Per family it reports
//   - each MoE layer's relative output error (eval's per-layer figure) of calibrated / plain
//     AMXINT4, and the median over all layers (target <= 0.6);
//   - the end-to-end mean KL(source || quantized) of both (target: calibrated < plain);
//   - eval's speed in tokens/s as a fraction of `record`'s forward on the same text, measured in
//     the same run; eval runs two forwards (source and quantized), so the target is that its
//     token-forwards per second, 2 x eval tokens/s, reach >= 0.8 of record's.
// Usage: moequant_calibrated_amx_bench [work-dir] [path-to-moequant] [preset tiny|small]
// The work dir is removed at the end.

#include <moequant/engine/calibration_dataset.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

struct Run {
    int status = -1;
    std::string out;
    double seconds = 0;
};

// Runs a shell command line, capturing stdout (stderr goes to the bench's own).
Run run(const std::string& command) {
    Run r;
    const auto t0 = std::chrono::steady_clock::now();
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return r;
    char buffer[4096];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
    r.status = ::pclose(pipe);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

void write_rows(const fs::path& file, const std::vector<std::string>& paragraphs, std::size_t parity) {
    std::ofstream out(file);
    for (std::size_t i = parity; i < paragraphs.size(); i += 2)
        out << json::serialize(json::object{{"text", paragraphs[i]}}) << "\n";
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct FamilyResult {
    std::string family;
    std::vector<double> layer_ratios;
    double kl_plain = 0, kl_calibrated = 0, eval_tps = 0, record_tps = 0;
    std::int64_t tokens = 0;
};

}  // namespace

int main(int argc, char** argv) {
    const fs::path work = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / "moequant-calibrated-amx-bench";
    const fs::path exe = argc > 2 ? fs::path(argv[2]) : fs::path(argv[0]).parent_path() / "moequant";
    const std::string preset = argc > 3 ? argv[3] : "tiny";
    fs::remove_all(work);
    fs::create_directories(work);
    const std::vector<std::string> paragraphs = moequant::embedded_calibration_paragraphs();
    const fs::path calibration = work / "calibration.jsonl", held_out = work / "held-out.jsonl";
    write_rows(calibration, paragraphs, 0);
    write_rows(held_out, paragraphs, 1);
    const std::string moequant = quoted(exe);

    // Each family in the dtype its real checkpoints ship in.
    const std::vector<std::pair<std::string, std::string>> families = {
        {"deepseek_v3", "fp8"}, {"kimi_k2", "fp8"},    {"glm4_moe", "bf16"}, {"minimax_m2", "fp8"},
        {"mixtral", "bf16"},    {"qwen3_moe", "bf16"}, {"qwen3_next", "bf16"}};
    std::vector<FamilyResult> results;
    std::vector<double> all_ratios;
    bool failed = false;
    for (const auto& [family, dtype] : families) {
        const fs::path dir = work / family, model = dir / "model";
        fs::create_directories(dir);
        auto must = [&](const std::string& what, const std::string& command) {
            Run r = run(command);
            if (r.status != 0) {
                std::fprintf(stderr, "%s: %s failed (status %d)\n", family.c_str(), what.c_str(), r.status);
                failed = true;
            }
            return r;
        };
        if (must("synth", moequant + " synth --family " + family + " --preset " + preset + " --dtype " + dtype + " --out " +
                              quoted(model) + " > /dev/null")
                .status)
            continue;
        if (must("convert", moequant + " convert -q -i " + quoted(model) + " -o " + quoted(dir / "plain")).status) continue;
        if (must("convert --calibrate", moequant + " convert -q --calibrate --dataset " + quoted(calibration) + " -i " +
                                            quoted(model) + " -o " + quoted(dir / "calibrated"))
                .status)
            continue;
        const std::string eval = moequant + " eval -q --json --model_id " + quoted(model) + " --dataset " + quoted(held_out);
        const Run plain = must("eval plain", eval + " --cpu-weights " + quoted(dir / "plain"));
        const Run calibrated = must("eval calibrated", eval + " --cpu-weights " + quoted(dir / "calibrated"));
        const Run record = must("record", moequant + " record -q --model_id " + quoted(model) + " --dataset " + quoted(held_out) +
                                              " -o " + quoted(dir / "record.safetensors"));
        if (plain.status || calibrated.status || record.status) continue;
        const json::object p = json::parse(plain.out).as_object(), c = json::parse(calibrated.out).as_object();
        FamilyResult r;
        r.family = family;
        r.tokens = p.at("tokens").to_number<std::int64_t>();
        r.kl_plain = p.at("kl_mean").to_number<double>();
        r.kl_calibrated = c.at("kl_mean").to_number<double>();
        const auto& pl = p.at("layers").as_array();
        const auto& cl = c.at("layers").as_array();
        for (std::size_t i = 0; i < std::min(pl.size(), cl.size()); ++i) {
            const double base = pl[i].at("relative_output_error").to_number<double>();
            if (base > 0) r.layer_ratios.push_back(cl[i].at("relative_output_error").to_number<double>() / base);
        }
        all_ratios.insert(all_ratios.end(), r.layer_ratios.begin(), r.layer_ratios.end());
        r.eval_tps = static_cast<double>(r.tokens) / calibrated.seconds;
        r.record_tps = static_cast<double>(r.tokens) / record.seconds;
        results.push_back(std::move(r));
        fs::remove_all(dir);
    }

    std::printf("calibrated vs plain AMXINT4, preset %s, calibration on %zu paragraphs, held-out eval on %zu\n\n", preset.c_str(),
                (paragraphs.size() + 1) / 2, paragraphs.size() / 2);
    std::printf("%-12s %7s %6s %18s %12s %12s %8s %14s %16s\n", "family", "tokens", "layers", "layer err ratio med",
                "KL plain", "KL calib", "KL ratio", "eval/record", "2xeval/record");
    bool met = !failed;
    for (const auto& r : results) {
        const double forward_fraction = 2 * r.eval_tps / r.record_tps;
        std::printf("%-12s %7lld %6zu %18.3f %12.4g %12.4g %8.3f %14.3f %16.3f\n", r.family.c_str(),
                    static_cast<long long>(r.tokens), r.layer_ratios.size(), median(r.layer_ratios), r.kl_plain,
                    r.kl_calibrated, r.kl_calibrated / r.kl_plain, r.eval_tps / r.record_tps, forward_fraction);
        met = met && r.kl_calibrated < r.kl_plain && forward_fraction >= 0.8;
    }
    const double overall = median(all_ratios);
    met = met && overall <= 0.6;
    std::printf("\nmedian per-layer output error ratio over all %zu layers: %.3f (target <= 0.6)\n", all_ratios.size(), overall);
    std::printf("targets (median <= 0.6, KL calibrated < plain in every family, 2 x eval / record >= 0.8): %s\n",
                met ? "met" : "NOT met");
    fs::remove_all(work);
    return failed ? 1 : 0;
}
