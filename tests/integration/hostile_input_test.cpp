// Hostile inputs (issue 13): files that are not regular files, files over their size limit,
// counts that overflow or claim far more than the checkpoint holds, bad option values and a
// shard truncated while it is read. Each is refused quickly with its exit code and one error
// line naming the file and the reason, never a hang, a crash or exit 1; nothing outside the
// output changes and nothing in the output looks complete. Every run has a deadline, so a
// regression that blocks (a FIFO opened without O_NONBLOCK) fails instead of hanging.

#include "test_support.hpp"

#include <moequant/output_file.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

using namespace moequant::test;
namespace json = boost::json;

namespace {

using Hashes = std::map<std::string, std::string>;

// The synthesized checkpoints every case copies, made on first use: qwen3_moe tiny per-expert
// with calibration activations, tiny fused-bmm, the small preset for the truncation race, and
// deepseek_v3 tiny (MLA attention).
struct Models {
    TempDir dir;
    fs::path per_expert = dir / "qwen3_moe";
    fs::path activations = dir / "activations.safetensors";
    fs::path fused = dir / "qwen3_moe_fused";
    fs::path small = dir / "qwen3_moe_small";
    fs::path deepseek = dir / "deepseek_v3";

    static const Models& get() {
        static const Models m;
        return m;
    }

private:
    Models() {
        for (std::vector<std::string> args :
             {std::vector<std::string>{"qwen3_moe", "--out", per_expert.string(), "--activations", activations.string()},
              {"qwen3_moe", "--out", fused.string(), "--layout", "fused-bmm"},
              {"qwen3_moe", "--out", small.string(), "--preset", "small"},
              {"deepseek_v3", "--out", deepseek.string()}}) {
            args.insert(args.begin(), {"synth", "--family"});
            const auto r = run_moequant(args);
            if (r.exit_code != 0) throw std::runtime_error("synth failed: " + r.err);
        }
    }
};

// Runs the host, killing it after `seconds`; a run that had to be killed fails the test.
CommandResult run_bounded(std::vector<std::string> args, int seconds = 120) {
    args.insert(args.begin(), host_executable().string());
    Child child(args);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (child.running() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const bool hung = child.running();
    if (hung) child.kill(SIGKILL);
    CommandResult r = child.wait();
    BOOST_TEST(!hung, "killed after " << seconds << " s: moequant " << args[1] << " did not finish");
    return r;
}

// The documented exit code and exactly one line "moequant: error: ..." holding every part.
void expect_refused(const CommandResult& r, int exit_code, const std::vector<std::string>& parts) {
    BOOST_TEST(r.exit_code == exit_code, "exit " << r.exit_code << ": " << r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    BOOST_TEST(r.err.starts_with("moequant: error: "), r.err);
    for (const auto& p : parts) BOOST_TEST(r.err.find(p) != std::string::npos, "missing '" << p << "' in: " << r.err);
}

// Hashes of every regular file under `dir` except those under `out` (relative to `dir`).
Hashes hashes_outside(const fs::path& dir, const std::string& out) {
    Hashes all = file_hashes(dir, true);
    std::erase_if(all, [&](const auto& kv) { return kv.first == out || kv.first.starts_with(out + "/"); });
    return all;
}

// Nothing in `out` passes for a finished output: no index, no manifest that says complete.
void expect_no_complete_output(const fs::path& out) {
    if (!fs::is_directory(out)) return;
    for (const auto& e : fs::recursive_directory_iterator(out)) {
        const std::string name = e.path().filename().string();
        BOOST_TEST(!name.ends_with(".index.json"), e.path() << " is an index of an output that failed");
        if (name == "moequant-run.json" && e.is_regular_file()) {
            const json::value m = json::parse(read_text(e.path()));
            BOOST_TEST(!m.at("complete").as_bool(), e.path() << " says complete");
        }
    }
}

// A case's folder: a copy of a model plus whatever the case adds; run() checks that the run is
// refused and that nothing outside the output folder "out" changed.
struct Case {
    TempDir dir;
    fs::path model;
    fs::path out = dir / "out";
    explicit Case(const fs::path& from = Models::get().per_expert) : model(dir / "model") {
        fs::copy(from, model, fs::copy_options::recursive);
    }

    void refused(const std::vector<std::string>& args, int exit_code, const std::vector<std::string>& parts) {
        const Hashes before = hashes_outside(dir.path(), "out");
        expect_refused(run_bounded(args), exit_code, parts);
        BOOST_TEST(hashes_outside(dir.path(), "out") == before, "files outside the output changed");
        expect_no_complete_output(out);
    }
    std::vector<std::string> convert() const { return {"convert", "-i", model.string(), "-o", out.string(), "--quiet"}; }
    void edit_config(const std::function<void(json::object&)>& change) const {
        json::value config = json::parse(read_text(model / "config.json"));
        change(config.as_object());
        write_text(model / "config.json", json::serialize(config));
    }
};

void make_fifo(const fs::path& path) {
    fs::remove_all(path);
    BOOST_REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
}

void link_to_dev_zero(const fs::path& path) {
    fs::remove_all(path);
    fs::create_symlink("/dev/zero", path);
}

// ---- recorded activations as bytes: overwriting the sample lengths ----

void set_sample_lengths(const fs::path& file, const std::vector<std::int64_t>& lengths) {
    auto bytes = read_bytes(file);
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const json::object header = json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n))).as_object();
    const auto& entry = header.at("sample_lengths").as_object();
    BOOST_REQUIRE(entry.at("shape").as_array().at(0).to_number<std::size_t>() == lengths.size());
    const auto begin = 8 + n + entry.at("data_offsets").as_array().at(0).to_number<std::uint64_t>();
    std::memcpy(bytes.data() + begin, lengths.data(), lengths.size() * 8);
    write_bytes(file, bytes);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hostile)
BOOST_AUTO_TEST_SUITE(inputs)

// ---- item 5: only regular files, bounded reads ----

BOOST_AUTO_TEST_CASE(config_json_as_a_fifo_or_dev_zero_is_refused) {
    for (auto make : {&make_fifo, &link_to_dev_zero}) {
        Case c;
        make(c.model / "config.json");
        c.refused({"inspect", c.model.string()}, 3, {"config.json", "NotARegularFile"});
        c.refused(c.convert(), 3, {"config.json", "NotARegularFile"});
    }
}

BOOST_AUTO_TEST_CASE(index_and_shard_that_are_not_regular_files_are_refused) {
    Case index;
    make_fifo(index.model / "model.safetensors.index.json");
    index.refused(index.convert(), 3, {"model.safetensors.index.json", "NotARegularFile"});
    Case shard;
    make_fifo(shard.model / "model-00001-of-00003.safetensors");
    shard.refused(shard.convert(), 3, {"model-00001-of-00003.safetensors", "NotARegularFile"});
}

BOOST_AUTO_TEST_CASE(json_inputs_over_their_size_limit_are_refused) {
    // Sparse files: the size alone refuses them, nothing is read.
    Case config;
    fs::resize_file(config.model / "config.json", (64ull << 20) + 1);
    config.refused(config.convert(), 3, {"config.json", "FileTooLarge", "67108864"});
    Case tokenizer;
    fs::resize_file(tokenizer.model / "tokenizer.json", (256ull << 20) + 1);
    tokenizer.refused({"record", "--model_id", tokenizer.model.string(), "--dataset", "embedded", "--output",
                       (tokenizer.out / "a.safetensors").string(), "--quiet"},
                      3, {"tokenizer.json", "FileTooLarge"});
}

BOOST_AUTO_TEST_CASE(tokenizer_json_as_a_fifo_is_refused_by_built_in_calibration) {
    Case c;
    make_fifo(c.model / "tokenizer.json");
    c.refused({"record", "--model_id", c.model.string(), "--dataset", "embedded", "--output",
               (c.out / "a.safetensors").string(), "--quiet"},
              3, {"tokenizer.json", "NotARegularFile"});
}

BOOST_AUTO_TEST_CASE(a_folder_named_tokenizer_json_is_not_copied_as_an_empty_file) {
    // It used to become a 0-byte tokenizer.json in an output that exited 0.
    Case c;
    fs::remove(c.model / "tokenizer.json");
    fs::create_directory(c.model / "tokenizer.json");
    c.refused(c.convert(), 3, {"tokenizer.json", "NotARegularFile"});
    BOOST_TEST(!fs::exists(c.out), "refused before the first layer, not after the last");
}

BOOST_AUTO_TEST_CASE(a_missing_optional_side_file_is_still_skipped) {
    Case c;
    fs::remove(c.model / "tokenizer.json");
    auto r = run_bounded(c.convert());
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(fs::exists(c.out / "model.safetensors.index.json"));
    BOOST_TEST(!fs::exists(c.out / "tokenizer.json"));
}

BOOST_AUTO_TEST_CASE(a_run_manifest_that_is_a_fifo_is_refused) {
    Case c;
    fs::create_directory(c.out);
    make_fifo(c.out / "moequant-run.json");
    c.refused(c.convert(), 3, {"moequant-run.json", "NotARegularFile"});
}

BOOST_AUTO_TEST_CASE(a_plugin_that_is_a_fifo_or_a_device_is_refused_before_loading) {
    Case c;
    make_fifo(c.dir / "moequant-x.so");
    c.refused({"inspect", c.model.string(), "--plugin", (c.dir / "moequant-x.so").string()}, 3,
              {"moequant-x.so", "NotARegularFile"});
    c.refused({"plugins", "--plugin", "/dev/zero"}, 3, {"/dev/zero", "NotARegularFile"});
}

BOOST_AUTO_TEST_CASE(calibration_inputs_that_are_not_regular_files_are_refused) {
    Case c;
    make_fifo(c.dir / "acts.safetensors");
    c.refused({"gptq", "--model_id", c.model.string(), "--output_dir", c.out.string(), "--calibration-activations",
               (c.dir / "acts.safetensors").string(), "--quiet"},
              3, {"acts.safetensors", "NotARegularFile"});
    c.refused({"gptq", "--model_id", c.model.string(), "--output_dir", c.out.string(), "--calibration-activations",
               "/dev/zero", "--quiet"},
              3, {"/dev/zero", "NotARegularFile"});
    make_fifo(c.dir / "rows.jsonl");
    c.refused({"gptq", "--model_id", c.model.string(), "--output_dir", c.out.string(), "--dataset",
               (c.dir / "rows.jsonl").string(), "--quiet"},
              3, {"rows.jsonl", "NotARegularFile"});
}

// ---- item 6: overflow-safe counts, work bounded by what is present ----

BOOST_AUTO_TEST_CASE(num_hidden_layers_far_beyond_the_checkpoint_is_refused_quickly) {
    for (double layers : {1e9, 1e12}) {
        Case c;
        c.edit_config([&](json::object& config) { config["num_hidden_layers"] = layers; });
        const auto started = std::chrono::steady_clock::now();
        c.refused(c.convert(), 3, {"config.json", "num_hidden_layers", "LayerCountMismatch"});
        BOOST_TEST((std::chrono::steady_clock::now() - started < std::chrono::seconds(20)), "the refusal took too long");
    }
}

BOOST_AUTO_TEST_CASE(an_overflowing_fused_expert_size_is_refused) {
    Case c(Models::get().fused);
    c.edit_config([](json::object& config) { config["moe_intermediate_size"] = std::int64_t{1} << 62; });
    c.refused(c.convert(), 3, {"config.json", "moe_intermediate_size", "overflows", "ValueOverflow"});
}

BOOST_AUTO_TEST_CASE(a_rotary_dimension_beyond_any_head_is_refused_before_allocating) {
    // The rope table is sized by the config before any weight is compared with it (was exit 1).
    for (std::int64_t rope : {std::int64_t{1'000'000'000'000}, std::int64_t{-2}}) {
        Case c(Models::get().deepseek);
        c.edit_config([&](json::object& config) { config["qk_rope_head_dim"] = rope; });
        c.refused({"record", "--model_id", c.model.string(), "--dataset", "embedded", "--output",
                   (c.out / "a.safetensors").string(), "--quiet"},
                  3, {"config.json", "rotary dimension", "InvalidConfig"});
    }
}

BOOST_AUTO_TEST_CASE(zero_head_counts_are_refused_not_divided_by) {
    // The forward divides by them (hidden_size / num_attention_heads): this was SIGFPE.
    for (const char* key : {"num_attention_heads", "num_key_value_heads", "head_dim"}) {
        Case c;
        c.edit_config([&](json::object& config) { config[key] = 0; });
        c.refused({"record", "--model_id", c.model.string(), "--dataset", "embedded", "--output",
                   (c.out / "a.safetensors").string(), "--quiet"},
                  3, {"config.json", key, "must be positive", "InvalidConfig"});
    }
}

BOOST_AUTO_TEST_CASE(huge_head_counts_are_refused_before_any_shape_is_computed) {
    // Their products (heads x head_dim x tokens) would wrap 64 bits: undefined behaviour, not an error.
    for (const char* key : {"num_attention_heads", "num_key_value_heads", "head_dim"}) {
        Case c;
        c.edit_config([&](json::object& config) { config[key] = std::int64_t{1} << 40; });
        c.refused({"record", "--model_id", c.model.string(), "--dataset", "embedded", "--output",
                   (c.out / "a.safetensors").string(), "--quiet"},
                  3, {"config.json", key, "beyond any decoder", "InvalidConfig"});
    }
}

BOOST_AUTO_TEST_CASE(sample_lengths_whose_sum_wraps_are_refused) {
    // 4 x 2^62 wraps to 0, so the sum would look like the 512 rows the file holds.
    Case c;
    const fs::path acts = c.dir / "acts.safetensors";
    fs::copy_file(Models::get().activations, acts);
    const std::int64_t huge = std::int64_t{1} << 62;
    set_sample_lengths(acts, {huge, huge, huge, huge, 128, 128, 128, 128});
    c.refused({"gptq", "--model_id", c.model.string(), "--output_dir", c.out.string(), "--calibration-activations",
               acts.string(), "--quiet"},
              3, {"acts.safetensors", "sample_lengths", "ValueOverflow"});
    c.refused({"plan", "--model_id", c.model.string(), "--activations", acts.string(), "--num-gpu-experts", "4",
               "--output", (c.out / "placement.json").string()},
              3, {"acts.safetensors", "sample_lengths", "ValueOverflow"});
}

BOOST_AUTO_TEST_CASE(bad_numeric_option_values_are_usage_errors) {
    Case c;
    const std::string m = c.model.string(), out = c.out.string();
    const std::vector<std::vector<std::string>> runs = {
        {"convert", "-i", m, "-o", out, "--threads", "-1"},
        {"convert", "-i", m, "-o", out, "--threads", "0"},
        {"convert", "-i", m, "-o", out, "--cpuinfer-threads", "-3"},
        {"convert", "-i", m, "-o", out, "--threads", "18446744073709551616"},
        {"gptq", "--model_id", m, "--output_dir", out, "--quant_method", "RTN", "--threads", "-1"},
        {"gptq", "--model_id", m, "--output_dir", out, "--dataset", "embedded", "--num_calibration_samples", "-5"},
        {"gptq", "--model_id", m, "--output_dir", out, "--dataset", "embedded", "--max_sequence_length", "-1"},
        {"gptq", "--model_id", m, "--output_dir", out, "--dataset", "embedded", "--max-memory", "-1"},
        {"gptq", "--model_id", m, "--output_dir", out, "--dataset", "embedded", "--max-memory", "nan"},
        {"gptq", "--model_id", m, "--output_dir", out, "--dataset", "embedded", "--max-memory", "inf"},
        {"gptq", "--model_id", m, "--output_dir", out, "--dataset", "embedded", "--dampening_frac", "nan"},
        {"record", "--model_id", m, "--dataset", "embedded", "--output", out + "/a.safetensors", "--max-memory", "nan"},
        {"record", "--model_id", m, "--dataset", "embedded", "--output", out + "/a.safetensors", "--num_calibration_samples", "0"},
        {"plan", "--model_id", m, "--activations", m, "--max_sequence_length", "-2"},
        {"synth", "--family", "qwen3_moe", "--out", out, "--samples", "-1"},
        {"synth", "--family", "qwen3_moe", "--out", out, "--activations", out + "/a.safetensors", "--samples", "100000",
         "--sample-tokens", "100000"},
        {"verify", "--source", m, "--converted", out, "--threads", "-1"},
        {"inspect", m, "--top", "-1"},
    };
    for (const auto& args : runs) {
        std::string option;
        for (const auto& a : args)
            if (a.starts_with("--")) option = a;  // the last option is the bad one
        BOOST_TEST_CONTEXT(args[0] << " " << option << " " << args.back()) {
            c.refused(args, 2, {option});
        }
    }
}

BOOST_AUTO_TEST_CASE(a_thread_count_beyond_the_cores_is_capped_not_an_allocation) {
    // TBB sized its bookkeeping by the cap: this ran out of memory (exit 1).
    Case c;
    const auto r = run_bounded({"convert", "-i", c.model.string(), "-o", c.out.string(), "--quiet", "--threads", "100000000000"});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(fs::exists(c.out / "model.safetensors.index.json"));
}

BOOST_AUTO_TEST_CASE(a_shard_truncated_while_mapped_is_an_input_error_not_a_signal) {
    Case c(Models::get().small);
    // The first shard holds layer 0 and the embedding, which is copied last: cut it to a page
    // once layer 0's output is written, while it is mapped.
    const fs::path victim = c.model / "model-00001-of-00004.safetensors";
    BOOST_REQUIRE(fs::exists(victim));
    // Each layer pauses once committed, so the cut always lands mid-run.
    const std::vector<std::string> slow_layers = {"MOEQUANT_TEST_PAUSE_AFTER_LAYER_MS=300"};
    auto args = c.convert();
    args.insert(args.begin(), host_executable(slow_layers).string());
    args.insert(args.end(), {"--threads", "1"});
    Child child(args, slow_layers);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (child.running() && !fs::exists(c.out / "model-00001-of-00005.safetensors") &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    fs::resize_file(victim, 4096);
    while (child.running() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const bool hung = child.running();
    if (hung) child.kill(SIGKILL);
    const CommandResult r = child.wait();
    BOOST_TEST(!hung, "the conversion did not end");
    BOOST_TEST(r.exit_code >= 0, "killed by signal " << -r.exit_code << ": " << r.err);
    expect_refused(r, 3, {victim.filename().string(), "FileTruncated"});
    expect_no_complete_output(c.out);
    // Whether the cut was seen before a read or by the fault handler mid-read, the run's lock
    // and temporaries are gone: the handler removes what no destructor will (docs/safety.md).
    for (const auto& e : fs::recursive_directory_iterator(c.out)) {
        const std::string name = e.path().filename().string();
        BOOST_TEST(name != ".moequant.lock", e.path());
        BOOST_TEST(!moequant::is_partial_name(name), e.path());
    }
}

BOOST_AUTO_TEST_SUITE_END()
BOOST_AUTO_TEST_SUITE_END()
