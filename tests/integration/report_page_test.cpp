// The report page (`plan --report`, `eval --report`, hybrid's report.html): one self-contained
// HTML file that a browser draws offline. Every page is checked as a file (its embedded data, no
// external resource) and, where Debian's chromium is installed (CI installs it), rendered by
// headless Chromium: no console message at all, the heat map and the error chart drawn with the
// expected numbers of cells and bars, and a screenshot taken. docs/report-page.md.
#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <regex>

using namespace moequant::test;
namespace json = boost::json;

namespace {

// The browser: MOEQUANT_CHROMIUM, else Debian's; empty when neither is there.
fs::path chromium() {
    if (const char* given = std::getenv("MOEQUANT_CHROMIUM"); given && *given) return given;
    return fs::exists("/usr/bin/chromium") ? fs::path("/usr/bin/chromium") : fs::path();
}

// The data the page embeds, and the page is self-contained: nothing it would fetch.
json::object embedded_data(const fs::path& page) {
    const std::string html = read_text(page);
    const std::string open = "<script type=\"application/json\" id=\"data\">";
    const std::size_t begin = html.find(open), end = html.find("</script>", begin);
    BOOST_REQUIRE(begin != std::string::npos && end != std::string::npos);
    BOOST_TEST(!std::regex_search(html, std::regex(R"((src|href)\s*=)")), "the page names no external resource");
    BOOST_TEST(!contains(html, "https://"));
    return json::parse(html.substr(begin + open.size(), end - begin - open.size())).as_object();
}

std::size_t occurrences(const std::string& text, const std::string& part) {
    std::size_t n = 0;
    for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
    return n;
}

// What headless Chromium drew: the DOM after the page's script ran, with no console message,
// and a screenshot. Skipped, with a message, without a browser.
void check_rendered(const fs::path& page, const TempDir& dir, std::size_t cells, std::size_t gpu_cells, std::size_t bars) {
    const fs::path browser = chromium();
    if (browser.empty()) {
        BOOST_TEST_MESSAGE("no chromium (apt install chromium, or MOEQUANT_CHROMIUM): the page is not rendered");
        return;
    }
    const std::vector<std::string> flags = {"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                                            "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                            "--user-data-dir=" + (dir / "profile").string()};
    auto browse = [&](std::vector<std::string> extra) {
        std::vector<std::string> argv = {"/usr/bin/timeout", "120", browser.string()};
        argv.insert(argv.end(), flags.begin(), flags.end());
        argv.insert(argv.end(), extra.begin(), extra.end());
        argv.push_back("file://" + fs::absolute(page).string());
        auto r = run_command(argv);
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return r;
    };
    auto dom = browse({"--enable-logging=stderr", "--v=0", "--dump-dom"});
    BOOST_TEST(!contains(dom.err, ":CONSOLE"), dom.err);  // the page's script logs nothing, and threw nothing
    BOOST_TEST(occurrences(dom.out, "class=\"cell gpu\"") == gpu_cells);
    BOOST_TEST(occurrences(dom.out, "class=\"cell") == cells);
    BOOST_TEST(occurrences(dom.out, "class=\"bar\"") == bars);
    const fs::path shot = dir / (page.stem().string() + ".png");
    browse({"--screenshot=" + shot.string(), "--window-size=1200,1500"});
    const std::vector<std::uint8_t> png = read_bytes(shot);
    BOOST_TEST(png.size() > 10000u);  // a drawn page, not a blank one
    BOOST_TEST((png.size() > 8 && png[1] == 'P' && png[2] == 'N' && png[3] == 'G'));
}

std::size_t true_count(const json::object& data) {
    std::size_t n = 0;
    for (const json::value& l : data.at("usage").at("layers").as_array())
        if (const auto* mask = l.as_object().if_contains("gpu_experts_mask"))
            for (const json::value& b : mask->as_array()) n += b.as_bool();
    return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(report_page)

BOOST_AUTO_TEST_CASE(plan_and_eval_reports_render_in_a_browser) {
    TempDir dir;
    synth_checkpoint(dir / "src", {"qwen3_moe", "bf16"}, {"--statistics", "trained"});
    const std::string src = (dir / "src").string();
    auto run_ok = [](const std::vector<std::string>& args) {
        auto r = run_moequant(args);
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, args.front() << " exit " << r.exit_code << ": " << r.err << r.out);
    };
    run_ok({"record", "--model_id", src, "--dataset", "embedded", "--num_calibration_samples", "4", "--max_sequence_length", "64",
            "--output", (dir / "acts.safetensors").string(), "-q"});
    run_ok({"plan", "--model_id", src, "--activations", (dir / "acts.safetensors").string(), "--num-gpu-experts", "5", "--output",
            (dir / "placement.json").string(), "--report", (dir / "plan.html").string(), "-q"});
    const json::object plan = embedded_data(dir / "plan.html");
    BOOST_TEST(plan.at("usage").at("layers").as_array().size() == 2u);
    BOOST_TEST(true_count(plan) == 5u);
    BOOST_TEST(contains(std::string(plan.at("commands").at(0).as_string()), "moequant plan --model_id " + src));
    check_rendered(dir / "plan.html", dir, 2 * 8, 5, 0);

    run_ok({"convert", "-i", src, "-o", (dir / "int4").string(), "--quant-method", "int4", "-q"});
    run_ok({"gptq", "--model_id", src, "--output_dir", (dir / "gptq").string(), "--quant_method", "RTN", "--quant_type", "W4A16", "-q"});
    run_ok({"eval", "--model_id", src, "--dataset", "embedded", "--num_calibration_samples", "2", "--max_sequence_length", "48",
            "--cpu-weights", (dir / "int4").string(), "--gpu-weights", (dir / "gptq").string(), "--placement",
            (dir / "placement.json").string(), "--report", (dir / "eval.html").string(), "-q"});
    const json::object eval = embedded_data(dir / "eval.html");
    const json::object& output = eval.at("outputs").at(0).as_object();
    BOOST_TEST(output.at("kl_mean").to_number<double>() > 0);
    BOOST_TEST(output.at("layers").as_array().size() == 2u);
    BOOST_TEST(true_count(eval) == 5u);  // the placement's GPU experts, marked on the eval text's use
    check_rendered(dir / "eval.html", dir, 2 * 8, 5, 2);

    // An existing report is replaced only with --overwrite.
    auto again = run_moequant({"plan", "--model_id", src, "--activations", (dir / "acts.safetensors").string(), "--num-gpu-experts", "5",
                               "--report", (dir / "plan.html").string(), "-q"});
    BOOST_TEST(again.exit_code == 5, again.err);
}

BOOST_AUTO_TEST_CASE(hybrid_report_renders_every_output_compared) {
    TempDir dir;
    synth_checkpoint(dir / "src", {"deepseek_v3", "fp8"}, {"--statistics", "trained"});
    auto r = run_moequant({"hybrid", "--model_id", (dir / "src").string(), "--output", (dir / "run").string(), "--gpu-memory", "3MiB",
                           "--dataset", "embedded", "--num_calibration_samples", "4", "--max_sequence_length", "64", "--eval-dataset",
                           "embedded", "--eval-samples", "2", "--eval-max-length", "48", "--compare-outputs", "-q"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const json::object data = embedded_data(dir / "run/report.html");
    const auto state = json::parse(read_text(dir / "run/hybrid.json")).as_object();
    const auto per_layer = static_cast<std::size_t>(state.at("gpu_experts_per_layer").to_number<std::int64_t>());
    BOOST_TEST(data.at("outputs").as_array().size() == 3u);  // the hybrid, every expert on the CPU, every expert on the GPU
    BOOST_TEST(data.at("outputs").at(0).at("kl_mean") == state.at("eval").at("kl_mean"));
    BOOST_TEST(true_count(data) == 2 * per_layer);
    BOOST_TEST(data.at("commands").as_array().size() == 2u);
    BOOST_TEST(data.at("commands").at(1) == state.at("launch"));
    BOOST_TEST(data.at("sizes").as_array().size() == 4u);
    check_rendered(dir / "run/report.html", dir, 2 * 8, 2 * per_layer, 2 * 3);
}

BOOST_AUTO_TEST_SUITE_END()
