// Hostile and careless use of the commands that write (issue 13, docs/safety.md "Output folders"): an
// output that is, holds or lies in the input; --overwrite of a folder that holds other files, of
// the home folder or the current one; two runs into one folder, one killed mid-run; links
// planted under the tool's temporary names; a rerun over changed output or source bytes; and
// single-file outputs over existing files. Every case checks the exit code and the one error
// line, that the source and every file outside the output keep their bytes, and that nothing
// that looks complete is left unless it verifies.

#include "checkpoint_rewrite.hpp"
#include "test_support.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <chrono>
#include <functional>
#include <thread>

using namespace moequant::test;
namespace json = boost::json;

namespace {

using Hashes = std::map<std::string, std::string>;

// A tiny model, made once per process: every case copies it, so none can spoil another's.
const fs::path& tiny_model() {
    static TempDir dir;
    static const fs::path model = [] {
        const fs::path m = dir / "qwen3";
        auto r = run_moequant({"synth", "--family", "qwen3_moe", "--out", m.string()});
        if (r.exit_code != 0) throw std::runtime_error("synth failed: " + r.err);
        return m;
    }();
    return model;
}

fs::path copy_model(const fs::path& to) {
    fs::create_directories(to.parent_path());
    fs::copy(tiny_model(), to, fs::copy_options::recursive);
    return to;
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

std::vector<std::string> convert_args(const fs::path& src, const fs::path& out) {
    return {"convert", "-i", src.string(), "-o", out.string(), "--quiet", "--threads", "1"};
}

// The refusal: `exit`, and stderr is exactly one error line carrying `code` and every `names`.
void expect_refused(const CommandResult& r, int exit, const std::string& code, const std::vector<std::string>& names = {}) {
    BOOST_TEST(r.exit_code == exit, "exit " << r.exit_code << ": " << r.err);
    BOOST_TEST(r.err.starts_with("moequant: error: "), r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    BOOST_TEST(r.err.find("(" + code + ")") != std::string::npos, r.err);
    for (const auto& n : names) BOOST_TEST(r.err.find(n) != std::string::npos, n << " not named in: " << r.err);
}

bool verifies(const fs::path& src, const fs::path& out) {
    auto r = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST_MESSAGE("verify: " << r.exit_code << " " << r.err);
    return r.exit_code == 0;
}

// True when the folder looks like a finished conversion (what a loader would take).
bool looks_complete(const fs::path& out) {
    if (!fs::exists(out / "model.safetensors.index.json") && !fs::exists(out / "moequant-run.json")) return false;
    try {
        return json::parse(read_text(out / "moequant-run.json")).at("complete").as_bool();
    } catch (const std::exception&) {
        return fs::exists(out / "model.safetensors.index.json");
    }
}

std::size_t recorded_layers(const fs::path& out) {
    try {
        return json::parse(read_text(out / "moequant-run.json")).at("completed_layers").as_array().size();
    } catch (const std::exception&) {
        return 0;
    }
}

// Waits (bounded) for `reached` while `child` runs; false when the child ended first.
bool wait_until(Child& child, const std::function<bool()>& reached) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (child.running() && !reached() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return child.running() && reached();
}

// Each committed layer waits this long, so a second run can be started or a kill land mid-way.
const std::vector<std::string> slow_layers = {"MOEQUANT_TEST_PAUSE_AFTER_LAYER_MS=400"};

// The host's command line for `args`, run with slow_layers.
std::vector<std::string> slow_host(std::vector<std::string> args) {
    args.insert(args.begin(), host_executable(slow_layers).string());
    return args;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hostile)
BOOST_AUTO_TEST_SUITE(outputs)

BOOST_AUTO_TEST_CASE(an_output_never_is_holds_or_lies_in_the_input) {
    TempDir dir;
    const fs::path src = copy_model(dir / "models/m");
    write_text(dir / "models/keep.txt", "the user's");
    const Hashes before = file_hashes(dir.path(), true);
    expect_refused(run_moequant({"convert", "-i", src.string(), "-o", src.string(), "--overwrite", "--quiet"}), 5, "OutputIsInput",
                   {src.string()});
    expect_refused(run_moequant(convert_args(src, dir / "models") + std::vector<std::string>{"--overwrite"}), 5,
                   "OutputContainsInput", {src.string()});
    expect_refused(run_moequant(convert_args(src, src / "out")), 5, "OutputInsideInput", {src.string()});
    // Other spellings of the same folder: a symlink, "..", a trailing slash, and an index file as input.
    fs::create_directory_symlink(src, dir / "link");
    expect_refused(run_moequant(convert_args(src, dir / "link")), 5, "OutputIsInput");
    expect_refused(run_moequant(convert_args(src, dir / "models/m/../m/")), 5, "OutputIsInput");
    expect_refused(run_moequant(convert_args(src / "model.safetensors.index.json", src)), 5, "OutputIsInput");
    // gptq --output_dir = --model_id, and --output_dir holding the calibration activations.
    expect_refused(run_moequant({"gptq", "--model_id", src.string(), "--output_dir", src.string(), "--quant_method", "RTN",
                                 "--overwrite", "--quiet"}),
                   5, "OutputIsInput");
    fs::remove(dir / "link");
    BOOST_TEST((file_hashes(dir.path(), true) == before));
    BOOST_TEST(!fs::exists(src / "out"));
}

BOOST_AUTO_TEST_CASE(overwrite_refuses_the_home_and_the_current_folder) {
    TempDir dir;
    const fs::path src = copy_model(dir / "m");
    fs::create_directories(dir / "work/here");
    write_text(dir / "work/here/notes.txt", "the user's");
    write_text(dir / "work/model-00001-of-00001.safetensors", "looks like a shard, is the user's");
    const Hashes before = file_hashes(dir.path(), true);
    const ChildLimits in_here{.working_directory = dir / "work/here"};
    for (const std::string& out : std::vector<std::string>{".", "..", (dir / "work").string(), (dir / "work/here").string()})
        expect_refused(run_moequant(convert_args(src, out) + std::vector<std::string>{"--overwrite"}, {}, in_here), 5,
                       "UnsafeOverwrite");
    // The home folder (HOME pointed at a scratch folder: never the real one).
    expect_refused(run_moequant(convert_args(src, dir / "work") + std::vector<std::string>{"--overwrite"},
                                {"HOME=" + (dir / "work").string()}),
                   5, "UnsafeOverwrite", {"home folder"});
    expect_refused(run_moequant({"synth", "--family", "qwen3_moe", "--out", (dir / "work").string(), "--overwrite"},
                                {"HOME=" + (dir / "work").string()}),
                   5, "UnsafeOverwrite");
    BOOST_TEST((file_hashes(dir.path(), true) == before));
}

BOOST_AUTO_TEST_CASE(overwrite_removes_only_what_a_conversion_writes) {
    TempDir dir;
    const fs::path src = copy_model(dir / "m");
    const fs::path out = dir / "out";
    BOOST_REQUIRE(run_moequant(convert_args(src, out)).exit_code == 0);
    // A user's files among an earlier conversion's: --overwrite (another method) refuses, naming one.
    write_text(out / "notes.txt", "the user's");
    write_text(out / ".draft.partial", "the user's own partial");
    const Hashes before = file_hashes(dir.path(), true);
    auto r = run_moequant(convert_args(src, out) + std::vector<std::string>{"--overwrite", "--quant-method", "int8"});
    expect_refused(r, 5, "ForeignEntry");
    const bool names_one = r.err.find("notes.txt") != std::string::npos || r.err.find(".draft.partial") != std::string::npos;
    BOOST_TEST(names_one, r.err);
    BOOST_TEST((file_hashes(dir.path(), true) == before));

    // Without them it replaces the output; a link named like a shard goes, its target stays.
    fs::remove(out / "notes.txt");
    fs::remove(out / ".draft.partial");
    write_text(dir / "precious.safetensors", "outside the output");
    fs::create_symlink(dir / "precious.safetensors", out / "model-00009-of-00009.safetensors");
    r = run_moequant(convert_args(src, out) + std::vector<std::string>{"--overwrite", "--quant-method", "int8"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST(read_text(dir / "precious.safetensors") == "outside the output");
    BOOST_TEST(!fs::exists(fs::symlink_status(out / "model-00009-of-00009.safetensors")));
    BOOST_TEST(verifies(src, out));

    // A folder holding an old manifest that completed nothing, and a user's file: refused, kept.
    fs::create_directories(dir / "old");
    fs::copy_file(out / "moequant-run.json", dir / "old/moequant-run.json");
    json::object m = json::parse(read_text(dir / "old/moequant-run.json")).as_object();
    m["completed_layers"] = json::array();
    m["complete"] = false;
    write_text(dir / "old/moequant-run.json", json::serialize(m));
    write_text(dir / "old/thesis.tex", "the user's");
    expect_refused(run_moequant(convert_args(src, dir / "old")), 5, "OutputExists");
    BOOST_TEST(read_text(dir / "old/thesis.tex") == "the user's");
}

BOOST_AUTO_TEST_CASE(overwrite_of_a_folder_that_no_run_wrote_removes_nothing) {
    // A downloaded model (no moequant-run.json) holds only names a conversion also writes; it is
    // still not a conversion's output, and --overwrite keeps every file of it.
    TempDir dir;
    const fs::path src = copy_model(dir / "m");
    const fs::path other = copy_model(dir / "downloaded");
    fs::remove(other / ".moequant-synth.json");  // what synth adds; a real download has no such file
    const Hashes before = file_hashes(dir.path(), true);
    auto r = run_moequant(convert_args(src, other) + std::vector<std::string>{"--overwrite"});
    expect_refused(r, 5, "ForeignEntry", {"no moequant-run.json"});
    expect_refused(run_moequant({"gptq", "--model_id", src.string(), "--output_dir", other.string(), "--quant_method", "RTN",
                                 "--overwrite", "--quiet"}),
                   5, "ForeignEntry");
    expect_refused(run_moequant({"synth", "--family", "mixtral", "--out", other.string(), "--overwrite"}), 5, "ForeignEntry");
    BOOST_TEST((file_hashes(dir.path(), true) == before));
}

BOOST_AUTO_TEST_CASE(synth_overwrite_respects_a_conversion_in_its_folder) {
    TempDir dir;
    const fs::path src = copy_model(dir / "m");
    const fs::path out = dir / "out";
    // A live conversion into --out: synth stops, the conversion finishes and verifies.
    Child converting(slow_host(convert_args(src, out)), slow_layers);
    BOOST_REQUIRE(wait_until(converting, [&] { return recorded_layers(out) >= 1; }));
    expect_refused(run_moequant({"synth", "--family", "qwen3_moe", "--out", out.string(), "--overwrite"}), 5, "OutputLocked");
    BOOST_TEST(converting.wait().exit_code == 0);
    BOOST_TEST(verifies(src, out));
    // A conversion killed in --out (its lock file stays): its files are not synth's to remove.
    fs::remove_all(out);
    {
        Child killed(slow_host(convert_args(src, out)), slow_layers);
        BOOST_REQUIRE(wait_until(killed, [&] { return recorded_layers(out) >= 1; }));
        killed.kill(SIGKILL);
        killed.wait();
    }
    auto without_lock = [](Hashes h) {  // the stale lock file may go: it is the tool's, and held by nobody
        h.erase(".moequant.lock");
        return h;
    };
    const Hashes before = without_lock(file_hashes(out, true));
    expect_refused(run_moequant({"synth", "--family", "qwen3_moe", "--out", out.string(), "--overwrite"}), 5, "ForeignEntry");
    BOOST_TEST((without_lock(file_hashes(out, true)) == before));
    // Calibration activations are never written into the checkpoint synth makes.
    expect_refused(run_moequant({"synth", "--family", "qwen3_moe", "--out", (dir / "n").string(), "--activations",
                                 (dir / "n/model-00001-of-00003.safetensors").string()}),
                   5, "OutputInsideInput");
    BOOST_TEST(!fs::exists(dir / "n"));
}

BOOST_AUTO_TEST_CASE(synth_keeps_users_files) {
    TempDir dir;
    // A user's sibling ".m.partial" is not synth's staging folder.
    fs::create_directories(dir / ".m.partial");
    write_text(dir / ".m.partial/mine.txt", "the user's");
    BOOST_REQUIRE(run_moequant({"synth", "--family", "mixtral", "--out", (dir / "m").string()}).exit_code == 0);
    BOOST_TEST(read_text(dir / ".m.partial/mine.txt") == "the user's");
    // --overwrite replaces a checkpoint synth wrote, but not a folder holding anything else.
    write_text(dir / "m/README.md", "the user's");
    const Hashes before = file_hashes(dir / "m", true);
    expect_refused(run_moequant({"synth", "--family", "mixtral", "--out", (dir / "m").string(), "--overwrite"}), 5,
                   "ForeignEntry", {"README.md"});
    BOOST_TEST((file_hashes(dir / "m", true) == before));
    BOOST_TEST(!fs::exists(dir / ".m.moequant.partial"));
    fs::remove(dir / "m/README.md");
    BOOST_TEST(run_moequant({"synth", "--family", "mixtral", "--out", (dir / "m").string(), "--overwrite"}).exit_code == 0);
    // A symlink planted as synth's staging folder loses only its name.
    fs::create_directories(dir / "elsewhere");
    write_text(dir / "elsewhere/keep.txt", "outside");
    fs::create_directory_symlink(dir / "elsewhere", dir / ".n.moequant.partial");
    BOOST_REQUIRE(run_moequant({"synth", "--family", "mixtral", "--out", (dir / "n").string()}).exit_code == 0);
    BOOST_TEST(read_text(dir / "elsewhere/keep.txt") == "outside");
    BOOST_TEST(fs::is_directory(dir / "n"));
}

BOOST_AUTO_TEST_CASE(one_writer_per_folder) {
    TempDir dir;
    const fs::path src = copy_model(dir / "m");
    BOOST_REQUIRE(run_moequant(convert_args(src, dir / "clean")).exit_code == 0);
    const Hashes clean = file_hashes(dir / "clean");
    const Hashes source = file_hashes(src, true);
    // A second run (the same job, then another job) started at several points of the first.
    const std::vector<std::pair<std::string, std::function<bool(const fs::path&)>>> moments = {
        {"folder exists", [](const fs::path& out) { return fs::exists(out / ".moequant.lock"); }},
        {"first layer done", [](const fs::path& out) { return recorded_layers(out) >= 1; }},
    };
    int second_started_mid_run = 0;
    for (const auto& point : moments)
        for (const std::string method : {"int4", "int8"}) {
            const std::string& moment = point.first;  // no structured binding: clang 14 cannot capture one
            const auto& reached = point.second;
            const fs::path out = dir / ("out-" + std::to_string(second_started_mid_run++));
            Child first(slow_host(convert_args(src, out)), slow_layers);
            // The pause after each layer makes every moment reachable; missing one is a failure.
            BOOST_REQUIRE_MESSAGE(wait_until(first, [&] { return reached(out); }), "the first run ended before '" << moment << "'");
            auto second = run_moequant(convert_args(src, out) + std::vector<std::string>{"--quant-method", method});
            expect_refused(second, 5, "OutputLocked", {".moequant.lock"});
            auto done = first.wait();
            BOOST_TEST(done.exit_code == 0, moment << ": " << done.err);
            BOOST_TEST((file_hashes(out) == clean), moment);
            BOOST_TEST(!fs::exists(out / ".moequant.lock"), "the lock file outlived the run");
        }
    BOOST_TEST((file_hashes(src, true) == source));
}

BOOST_AUTO_TEST_CASE(a_killed_run_leaves_no_lock_that_blocks_the_rerun) {
    TempDir dir;
    const fs::path src = copy_model(dir / "m");
    BOOST_REQUIRE(run_moequant(convert_args(src, dir / "clean")).exit_code == 0);
    const Hashes clean = file_hashes(dir / "clean");
    for (std::size_t layers : {0u, 1u}) {
        const fs::path out = dir / ("killed-" + std::to_string(layers));
        {
            Child first(slow_host(convert_args(src, out)), slow_layers);
            const bool mid = wait_until(first, [&] { return fs::exists(out / ".moequant.lock") && recorded_layers(out) >= layers; });
            first.kill(SIGKILL);
            first.wait();
            BOOST_REQUIRE_MESSAGE(mid, "the run ended before the kill at " << layers << " layer(s)");
            BOOST_TEST(fs::exists(out / ".moequant.lock"), "a killed run leaves its lock file (and no held lock)");
        }
        BOOST_TEST((!looks_complete(out) || verifies(src, out)), "a killed run left an output that looks complete");
        auto rerun = run_moequant(convert_args(src, out));
        BOOST_TEST(rerun.exit_code == 0, rerun.err);
        BOOST_TEST((file_hashes(out) == clean));
        BOOST_TEST(verifies(src, out));
    }
}

BOOST_AUTO_TEST_CASE(writes_never_follow_planted_links) {
    TempDir dir;
    const fs::path src = copy_model(dir / "m");
    write_text(dir / "victim.txt", "outside the output");
    fs::create_directories(dir / "victim-folder");
    write_text(dir / "victim-folder/keep.txt", "outside the output");
    // A rerun that must redo layer 0 (one of its bytes changed), with a link planted under every
    // temporary name it creates: the layer's shard or tree staging folder, the side files, the
    // manifest.
    for (const bool tree : {false, true}) {
        const fs::path out = dir / (tree ? "tree" : "merged");
        std::vector<std::string> args = convert_args(src, out);
        if (tree) args.push_back("--no-merge-safetensor");
        BOOST_REQUIRE(run_moequant(args).exit_code == 0);
        const Hashes clean = file_hashes(out);
        const fs::path layer0 = tree ? fs::directory_iterator(out / "_layer_0/_numa_0")->path()
                                     : out / "model-00001-of-00003.safetensors";
        std::vector<std::uint8_t> bytes = read_bytes(layer0);
        bytes.back() ^= 1;
        write_bytes(layer0, bytes);
        if (tree) {
            fs::create_directory_symlink(dir / "victim-folder", out / "._layer_0.moequant.partial");
        } else {
            fs::create_symlink(dir / "victim.txt", out / ".model-00001-of-00003.safetensors.moequant.partial");
            fs::create_symlink(dir / "victim.txt", out / ".config.json.moequant.partial");
        }
        fs::create_symlink(dir / "victim.txt", out / ".moequant-run.json.moequant.partial");
        auto r = run_moequant(args);
        BOOST_TEST(r.exit_code == 0, r.err);
        BOOST_TEST(read_text(dir / "victim.txt") == "outside the output");
        BOOST_TEST(read_text(dir / "victim-folder/keep.txt") == "outside the output");
        BOOST_TEST(fs::exists(dir / "victim-folder/keep.txt"));
        BOOST_TEST((file_hashes(out) == clean));
        BOOST_TEST(verifies(src, out));
    }
    // A link planted as the lock is refused, never followed.
    const fs::path out = dir / "locked";
    fs::create_directories(out);
    fs::create_symlink(dir / "victim.txt", out / ".moequant.lock");
    expect_refused(run_moequant(convert_args(src, out)), 5, "UnsafeLock");
    BOOST_TEST(read_text(dir / "victim.txt") == "outside the output");
}

BOOST_AUTO_TEST_CASE(a_rerun_checks_what_it_adopts) {
    TempDir dir;
    const fs::path src = copy_model(dir / "m");
    const fs::path out = dir / "out";
    BOOST_REQUIRE(run_moequant(convert_args(src, out)).exit_code == 0);
    const Hashes clean = file_hashes(out);
    std::vector<std::string> loud = convert_args(src, out);
    loud.erase(std::find(loud.begin(), loud.end(), "--quiet"));
    // A completed layer's shard with one byte changed, same size: redone, with a line saying why.
    const fs::path shard = out / "model-00001-of-00003.safetensors";
    std::vector<std::uint8_t> bytes = read_bytes(shard);
    bytes.back() ^= 1;
    write_bytes(shard, bytes);
    auto r = run_moequant(loud);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST(r.err.find("model-00001-of-00003.safetensors holds other bytes") != std::string::npos, r.err);
    BOOST_TEST(r.out.find("kept 1 completed earlier") != std::string::npos, r.out);
    BOOST_TEST((file_hashes(out) == clean));
    // A source shard rewritten since (same bytes, new modification time): its layers are redone.
    const fs::path source_shard = src / "model-00001-of-00003.safetensors";
    fs::last_write_time(source_shard, fs::last_write_time(source_shard) + std::chrono::seconds(5));
    r = run_moequant(loud);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST(r.err.find("source shard model-00001-of-00003.safetensors changed") != std::string::npos, r.err);
    BOOST_TEST((file_hashes(out) == clean));
    // Unchanged: everything is adopted.
    r = run_moequant(convert_args(src, out));
    BOOST_TEST(r.out.find("converted 0 layer(s), kept 2") != std::string::npos, r.out);
    // A source expert's byte changed with the shard's size, time and header kept (another copy
    // of the checkpoint): the layer made of it is redone, from the bytes there now.
    const fs::path source_of_layer = src / "model-00001-of-00003.safetensors";
    const auto when = fs::last_write_time(source_of_layer);
    edit_tensor_bytes(src, "model.layers.0.mlp.experts.1.gate_proj.weight", [](std::uint8_t* b, std::size_t n) { b[n / 2] ^= 0x40; });
    fs::last_write_time(source_of_layer, when);
    r = run_moequant(loud);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST(r.err.find("layer 0 is converted again: its source tensors hold other bytes") != std::string::npos, r.err);
    BOOST_TEST(r.out.find("kept 1 completed earlier") != std::string::npos, r.out);
    const fs::path fresh = dir / "fresh";
    BOOST_REQUIRE(run_moequant(convert_args(src, fresh)).exit_code == 0);
    BOOST_TEST((file_hashes(out) == file_hashes(fresh)));
}

BOOST_AUTO_TEST_CASE(single_file_outputs_never_replace_a_file_unasked) {
    TempDir dir;
    const fs::path src = copy_model(dir / "m");
    const fs::path acts = dir / "acts.safetensors";
    BOOST_REQUIRE(run_moequant({"synth", "--family", "qwen3_moe", "--out", (dir / "m2").string(), "--activations", acts.string()})
                      .exit_code == 0);
    write_text(dir / "mine.json", "the user's");
    write_text(dir / ".mine.json.partial", "the user's own partial");
    fs::create_directories(dir / "a-folder");
    const Hashes before = file_hashes(dir.path(), true);
    const std::string mine = (dir / "mine.json").string();
    // plan --output: an existing file, the activations it reads, the model's own config.json.
    const std::vector<std::string> plan = {"plan", "--model_id", src.string(), "--activations", acts.string(),
                                           "--num-gpu-experts", "4", "--output"};
    expect_refused(run_moequant(plan + std::vector<std::string>{mine}), 5, "OutputExists", {"mine.json"});
    expect_refused(run_moequant(plan + std::vector<std::string>{acts.string(), "--overwrite"}), 5, "OutputIsInput");
    expect_refused(run_moequant(plan + std::vector<std::string>{(src / "config.json").string(), "--overwrite"}), 5,
                   "OutputInsideInput");
    expect_refused(run_moequant(plan + std::vector<std::string>{(dir / "a-folder").string(), "--overwrite"}), 5, "OutputNotAFile");
    // record --output and gptq --save-activations: the same rules.
    const std::vector<std::string> record = {"record", "--model_id", src.string(), "--dataset", "embedded",
                                             "--num_calibration_samples", "2", "--quiet", "--output"};
    expect_refused(run_moequant(record + std::vector<std::string>{mine}), 5, "OutputExists");
    expect_refused(run_moequant(record + std::vector<std::string>{(src / "model-00001-of-00003.safetensors").string(), "--overwrite"}),
                   5, "OutputInsideInput");
    expect_refused(run_moequant({"gptq", "--model_id", src.string(), "--output_dir", (dir / "g").string(), "--dataset", "embedded",
                                 "--num_calibration_samples", "2", "--quiet", "--save-activations", mine}),
                   5, "OutputExists");
    // synth --activations over an existing file.
    expect_refused(run_moequant({"synth", "--family", "qwen3_moe", "--out", (dir / "m3").string(), "--activations", mine}), 5,
                   "OutputExists");
    BOOST_TEST((file_hashes(dir.path(), true) == before));
    BOOST_TEST(!fs::exists(dir / "g"));
    BOOST_TEST(!fs::exists(dir / "m3"));
    // With --overwrite the file is replaced whole; the user's ".mine.json.partial" stays.
    auto r = run_moequant(plan + std::vector<std::string>{mine, "--overwrite"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST(json::parse(read_text(dir / "mine.json")).as_object().contains("layers"));
    BOOST_TEST(read_text(dir / ".mine.json.partial") == "the user's own partial");
}

BOOST_AUTO_TEST_SUITE_END()
BOOST_AUTO_TEST_SUITE_END()
