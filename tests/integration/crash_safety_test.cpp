// Crash safety of `moequant convert` (conventions.md §4): a conversion killed with SIGKILL at
// any point leaves no file under its final name that differs from the finished output, and the
// same command run again (or with --resume-layer) gives exactly the files of one uninterrupted
// run. Both the merged safetensors and the .kt tree; the kills are timed by what appears in the
// output folder (the folder itself, the first layer, a middle layer, the last file before the
// index). On a machine fast enough to finish before a kill lands the checks still hold.

#include "test_support.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <functional>
#include <thread>

using namespace moequant::test;
namespace json = boost::json;

namespace {

using Hashes = std::map<std::string, std::string>;

// Completed layers the run manifest records (0 while there is none or it is being replaced).
std::size_t recorded_layers(const fs::path& out) {
    try {
        return json::parse(read_text(out / "moequant-run.json")).at("completed_layers").as_array().size();
    } catch (const std::exception&) {
        return 0;
    }
}

// Starts `args` (with one worker thread, to widen the windows), kills it with SIGKILL as soon as
// `reached()` holds, and reports whether the kill landed before it finished.
bool run_and_kill(const std::vector<std::string>& args, const std::function<bool()>& reached) {
    std::vector<std::string> argv = {host_executable().string()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--threads", "1"});
    Child child(argv);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (child.running() && !reached() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    child.kill(SIGKILL);
    CommandResult r = child.wait();
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0 || r.exit_code == -SIGKILL, "exit " << r.exit_code << ": " << r.err);
    return r.exit_code == -SIGKILL;
}

// After a kill, every file under its final name (no path component starting with '.') holds
// the bytes of the finished output; only the run manifest records progress.
void check_no_half_written_file(const fs::path& out, const Hashes& clean) {
    if (!fs::exists(out)) return;
    for (const auto& [name, hash] : file_hashes(out)) {
        if (name.starts_with(".") || name.find("/.") != std::string::npos) continue;
        auto it = clean.find(name);
        BOOST_TEST((it != clean.end() && it->second == hash), name << " is under its final name but is not the finished file");
    }
}

void check_format(const fs::path& src, const fs::path& dir, bool tree) {
    std::vector<std::string> base = {"convert", "-i", src.string(), "--quiet"};
    if (tree) base.push_back("--no-merge-safetensor");
    auto with_output = [&](const fs::path& out) {
        auto args = base;
        args.insert(args.end(), {"-o", out.string()});
        return args;
    };
    const fs::path clean_dir = dir / (tree ? "clean_tree" : "clean");
    auto r = run_moequant(with_output(clean_dir));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const Hashes clean = file_hashes(clean_dir, true);

    // What appears in order: each layer's shard (or folder), then the other tensors' shard.
    std::vector<fs::path> markers;
    for (const auto& e : fs::directory_iterator(clean_dir)) {
        const std::string name = e.path().filename().string();
        if (name.ends_with(".safetensors") || name.starts_with("_layer_")) markers.push_back(name);
    }
    std::sort(markers.begin(), markers.end());
    BOOST_REQUIRE(markers.size() >= 4);
    const std::vector<std::pair<std::string, fs::path>> points = {
        {"output folder created", ""}, {"first layer written", markers.front()},
        {"a middle layer written", markers[markers.size() / 2]}, {"last file before the index", markers.back()}};

    int n = 0, mid_run = 0;
    for (const auto& [what, name] : points) {
        const fs::path marker = name;  // clang 14 cannot capture a structured binding
        BOOST_TEST_CONTEXT((tree ? "kt tree" : "merged") << ", killed when " << what) {
            const fs::path out = dir / ((tree ? "tree" : "merged") + std::to_string(n++));
            mid_run += run_and_kill(with_output(out), [&] { return fs::exists(out / marker); });
            check_no_half_written_file(out, clean);
            r = run_moequant(with_output(out));
            BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            BOOST_TEST((file_hashes(out, true) == clean));
        }
    }

    // Killed once two layers are recorded, then rerun from the second layer on.
    BOOST_TEST_CONTEXT((tree ? "kt tree" : "merged") << ", killed, then --resume-layer") {
        const fs::path out = dir / (tree ? "tree_resume" : "merged_resume");
        mid_run += run_and_kill(with_output(out), [&] { return recorded_layers(out) >= 2; });
        check_no_half_written_file(out, clean);
        auto args = with_output(out);
        const std::string second = markers[1].string();  // "model-00002-of-…" or "_layer_1": layer 1 here
        BOOST_REQUIRE(second == "model-00002-of-00005.safetensors" || second == "_layer_1");
        args.insert(args.end(), {"--resume-layer", "1"});
        r = run_moequant(args);
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        BOOST_TEST(r.out.find("kept 1 completed earlier") != std::string::npos, r.out);
        BOOST_TEST((file_hashes(out, true) == clean));
    }
    BOOST_TEST_MESSAGE((tree ? "kt tree: " : "merged: ") << mid_run << " of 5 kills landed mid-run");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(crash_safety)

BOOST_AUTO_TEST_CASE(killed_conversions_rerun_to_the_clean_bytes) {
    TempDir dir;
    // qwen3_next: four MoE layers (0-3) with 8 experts each.
    auto r = run_moequant({"synth", "--family", "qwen3_next", "--out", (dir / "src").string()});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    check_format(dir / "src", dir.path(), false);
    check_format(dir / "src", dir.path(), true);
}

BOOST_AUTO_TEST_SUITE_END()
