// The moequant host run as a child process: help, version, exit codes, one-line errors for
// every bad input, plugin listing, inspect output.

#include "test_support.hpp"

#include <moequant/cpu_isa.hpp>
#include <moequant/plugin.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>

using namespace moequant::test;

namespace {

std::string fixture_plugin(const std::string& variant) {
    return (fs::path(MOEQUANT_TEST_PLUGIN_DIR) / ("moequant-quantizer-fixture_" + variant + ".so")).string();
}

std::size_t line_count(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

// A failing run: the expected code, exactly one line on stderr that starts with
// "moequant: error:" and contains every `parts`.
void expect_failure(const CommandResult& r, int code, const std::vector<std::string>& parts) {
    BOOST_TEST(r.exit_code == code, "exit " << r.exit_code << ", stderr: " << r.err);
    BOOST_TEST(line_count(r.err) == 1u, "stderr: " << r.err);
    BOOST_TEST(r.err.rfind("moequant: error: ", 0) == 0u, r.err);
    for (const auto& p : parts) BOOST_TEST(contains(r.err, p), "missing '" << p << "' in: " << r.err);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(version_and_help) {
    auto v = run_moequant({"--version"});
    BOOST_TEST(v.exit_code == 0);
    BOOST_TEST(v.out.rfind("moequant ", 0) == 0u);
    BOOST_TEST(contains(v.out, "plugin ABI " + std::to_string(MOEQUANT_PLUGIN_ABI_VERSION) + ", SDK "), v.out);
    // The kernels' ISA, and what capped it.
    auto capped = run_moequant({"--version"}, {"MOEQUANT_ISA=scalar"});
    BOOST_TEST(contains(capped.out, "CPU kernels: scalar"), capped.out);
    const std::string detected = moequant::isa_name(moequant::detected_isa()).data();
    if (detected != "scalar") BOOST_TEST(contains(capped.out, "(this CPU has " + detected + "; capped by MOEQUANT_ISA)"), capped.out);
    BOOST_TEST(contains(run_moequant({"--version"}, {"MOEQUANT_ISA="}).out, "CPU kernels: " + detected));
    auto h = run_moequant({"--help"});
    BOOST_TEST(h.exit_code == 0);
    for (const char* part : {"plugins", "inspect", "Exit codes", "MOEQUANT_PLUGIN_PATH", "3  invalid input"})
        BOOST_TEST(contains(h.out, part), part);
    for (const char* cmd : {"plugins", "inspect"}) {
        auto r = run_moequant({cmd, "--help"});
        BOOST_TEST(r.exit_code == 0, cmd);
        BOOST_TEST(contains(r.out, std::string("moequant ") + cmd), cmd);
        BOOST_TEST(contains(r.out, "--plugin-dir"), cmd);
    }
}

// `moequant completion bash|zsh`: the script completes commands, each command's options (read
// from its --help), the choices of an option's value and file names, run as each shell runs it
// (zsh's completion builtins stubbed to print what they are given).
BOOST_AUTO_TEST_CASE(shell_completion_scripts_complete_commands_options_and_values) {
    TempDir dir;
    const std::string host = host_executable().string();
    const auto bash = run_moequant({"completion", "bash"});
    BOOST_REQUIRE_EQUAL(bash.exit_code, 0);
    write_text(dir / "moequant.bash", bash.out);
    write_text(dir / "complete.bash",
               "source \"$1\"\n"
               "t() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); _moequant; echo \"${COMPREPLY[*]}\"; }\n"
               "t \"$2\" con\n"
               "t \"$2\" convert --input-t\n"
               "t \"$2\" gptq --torch_dtype f\n"
               "t \"$2\" --pl\n"
               "t \"$2\" convert -i \"$3/moequant.b\"\n"
               "t \"$2\" completion z\n");
    auto r = run_command({"/bin/bash", (dir / "complete.bash").string(), (dir / "moequant.bash").string(), host, dir.path().string()});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(r.out == "convert\n--input-type\nfloat16 float32\n--plugin --plugin-dir\n" + (dir / "moequant.bash").string() + "\nzsh\n");

    const auto zsh = run_moequant({"completion", "zsh"});
    BOOST_REQUIRE_EQUAL(zsh.exit_code, 0);
    BOOST_TEST(zsh.out.rfind("#compdef moequant\n", 0) == 0u);
    if (fs::exists("/usr/bin/zsh")) {  // installed by scripts/install-deps.sh for this test
        write_text(dir / "_moequant", zsh.out);
        write_text(dir / "complete.zsh",
                   "compdef() { : }\ncompadd() { [[ $1 == -- ]] && shift; print -r -- \"$*\" }\n_files() { print -r -- files }\n"
                   "source \"$1\"\n"
                   "t() { words=(\"$@\"); CURRENT=$#; _moequant }\n"
                   "t \"$2\" gptq --quant_type ''\n"
                   "t \"$2\" completion ''\n"
                   "t \"$2\" convert --output ''\n");
        auto z = run_command({"/usr/bin/zsh", "-f", (dir / "complete.zsh").string(), (dir / "_moequant").string(), host});
        BOOST_TEST(z.exit_code == 0, z.err);
        BOOST_TEST(z.out == "W4A16 W8A16\nbash zsh\nfiles\n");
    }
    auto none = run_moequant({"completion", "fish"});
    BOOST_TEST(none.exit_code == 2);
    BOOST_TEST(contains(none.err, "no completion for shell 'fish'"), none.err);
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2) {
    expect_failure(run_moequant({"frobnicate"}), 2, {"unknown command 'frobnicate'"});
    expect_failure(run_moequant({"inspect", "--no-such-option"}), 2, {"no-such-option"});
    expect_failure(run_moequant({"inspect"}), 2, {"needs a PATH"});
    auto none = run_moequant({});
    BOOST_TEST(none.exit_code == 2);
    BOOST_TEST(contains(none.err, "Usage"));
}

BOOST_AUTO_TEST_CASE(inspect_sharded_fixture) {
    auto r = run_moequant({"inspect", (fixtures_dir() / "safetensors_jl_testdata/sharded").string()});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    BOOST_TEST(contains(r.out, "shards: 6  tensors: 36  data: 4,305 bytes"), r.out);
    BOOST_TEST(contains(r.out, "F8_E4M3"));
    BOOST_TEST(contains(r.out, "largest tensors:"));
    BOOST_TEST(r.err.empty());
}

BOOST_AUTO_TEST_CASE(inspect_json_is_machine_readable) {
    auto r = run_moequant({"inspect", "--json", "--top", "3",
                       (fixtures_dir() / "safetensors_jl_testdata/non_sharded/model.with_metadata.safetensors").string()});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    auto doc = boost::json::parse(r.out).as_object();
    BOOST_TEST(doc.at("tensors").as_int64() == 36);
    BOOST_TEST(doc.at("data_bytes").as_int64() == 4305);
    BOOST_TEST(doc.at("shards").as_int64() == 1);
    BOOST_TEST(doc.at("largest").as_array().size() == 3u);
    BOOST_TEST(doc.at("metadata").as_object().at("version").as_string() == "2.2");
    // Largest first: the I64/F64 [3,5,7] tensors of 840 bytes.
    BOOST_TEST(doc.at("largest").as_array()[0].as_object().at("bytes").as_int64() == 840);
}

BOOST_AUTO_TEST_CASE(global_options_are_accepted_before_and_after_the_command) {
    auto path = (fixtures_dir() / "safetensors_cpp_testdata/gen/model.safetensors").string();
    BOOST_TEST(run_moequant({"--no-default-plugins", "inspect", path}).exit_code == 0);
    BOOST_TEST(run_moequant({"inspect", path, "--no-default-plugins"}).exit_code == 0);
    BOOST_TEST(run_moequant({"--plugin-dir", MOEQUANT_TEST_PLUGIN_DIR, "inspect", path}).exit_code == 0);
}

BOOST_AUTO_TEST_CASE(the_abuse_file_is_one_clear_error) {
    auto path = fixtures_dir() / "safetensors_cpp_testdata/test/safetensors_abuse_attempt_1.safetensors";
    auto r = run_moequant({"inspect", path.string()});
    expect_failure(r, 3, {path.string(), "InvalidHeaderLength", "1000"});
    BOOST_TEST(r.out.empty());
}

// Every malformed-header case of model-families.md §3.5, through the CLI.
BOOST_AUTO_TEST_CASE(every_malformed_header_is_exit_3_with_its_reason) {
    struct Case {
        const char* name;
        std::vector<std::uint8_t> bytes;
        const char* code;
    };
    auto with = [](const std::string& header, std::size_t data, std::uint64_t prefix = UINT64_MAX) {
        return safetensors_bytes(header, std::vector<std::uint8_t>(data, 0), prefix);
    };
    const std::string one = R"({"weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
    std::string overlap = "{";
    for (int i = 0; i < 10; ++i)
        overlap += (i ? "," : "") + std::string("\"w") + std::to_string(i) + R"(":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
    overlap += "}";
    std::vector<Case> cases = {
        {"empty", {}, "HeaderTooSmall"},
        {"length_only", with("", 0, 60), "InvalidHeaderLength"},
        {"huge_length", with(one, 16, 0xFFFFFF000000003Cull), "HeaderTooLarge"},
        {"beyond_file", with(one + "  ", 16, 1000), "InvalidHeaderLength"},
        {"non_utf8", with("\xff", 0), "InvalidHeader"},
        {"not_json", with("{", 0), "InvalidHeaderDeserialization"},
        {"size_mismatch", with(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0, 4]}})", 0), "TensorInvalidInfo"},
        {"overflow1", with(R"({"t":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}})", 16), "ValidationOverflow"},
        {"overflow2", with(R"({"t":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}})", 16), "ValidationOverflow"},
        {"overlap", with(overlap, 16), "InvalidOffset"},
        {"missing_bytes", with(one, 14), "MetadataIncompleteBuffer"},
        {"trailing_bytes", with(one, 50), "MetadataIncompleteBuffer"},
        {"unknown_dtype", with(R"({"t":{"dtype":"Q4_K","shape":[1],"data_offsets":[0,1]}})", 1), "UnknownDtype"},
        {"duplicate", with(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"t":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2), "DuplicateTensorName"},
    };
    TempDir dir;
    for (const auto& c : cases) {
        auto file = dir / (std::string(c.name) + ".safetensors");
        write_bytes(file, c.bytes);
        auto r = run_moequant({"inspect", file.string()});
        BOOST_TEST_CONTEXT("case " << c.name) { expect_failure(r, 3, {file.string(), c.code}); }
    }
}

BOOST_AUTO_TEST_CASE(broken_checkpoints_are_exit_3) {
    TempDir dir;
    expect_failure(run_moequant({"inspect", (dir / "absent").string()}), 3, {"absent", "no such file or folder"});
    expect_failure(run_moequant({"inspect", dir.path().string()}), 3, {"NoCheckpoint"});
    write_text(dir / "model.safetensors.index.json", R"({"weight_map": {"t": "model-00002-of-00002.safetensors"}})");
    expect_failure(run_moequant({"inspect", dir.path().string()}), 3,
                   {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "does not exist"});
}

BOOST_AUTO_TEST_CASE(plugins_lists_good_modules_and_with_all_the_rejected_ones) {
    auto r = run_moequant({"plugins", "--no-default-plugins", "--plugin-dir", MOEQUANT_TEST_PLUGIN_DIR});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    BOOST_TEST(contains(r.out, "fixture_good"));
    BOOST_TEST(contains(r.out, "fixture-good"));
    BOOST_TEST(contains(r.out, "1.2.3"));
    BOOST_TEST(contains(r.out, "moequant-quantizer-fixture_good.so"));
    BOOST_TEST(contains(r.err, "rejected; run 'moequant plugins --all'"));
    BOOST_TEST(!contains(r.out, "toolchain mismatch"));

    auto all = run_moequant({"plugins", "--all", "--no-default-plugins", "--plugin-dir", MOEQUANT_TEST_PLUGIN_DIR});
    BOOST_TEST_REQUIRE(all.exit_code == 0, all.err);
    for (const char* reason : {"toolchain mismatch", "built for plugin ABI", "not usable on this machine",
                               "registration failed", "cannot load", "not a shared library", "hint:"})
        BOOST_TEST(contains(all.out, reason), reason);
    // The plugin built against ABI 7 is listed as refused, with both numbers.
    BOOST_TEST(contains(all.out, "moequant-quantizer-fixture_abi_seven.so"));
    BOOST_TEST(contains(all.out, "built for plugin ABI 7"));
    BOOST_TEST(!contains(r.out, "fixture_abi_seven"), "an ABI 7 plugin was loaded");
}

BOOST_AUTO_TEST_CASE(plugins_json_lists_objects_and_rejections) {
    auto r = run_moequant({"plugins", "--all", "--json", "--no-default-plugins", "--plugin", fixture_plugin("second_good"),
                       "--plugin-dir", MOEQUANT_TEST_PLUGIN_DIR});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    auto doc = boost::json::parse(r.out).as_object();
    auto& plugins = doc.at("plugins").as_array();
    BOOST_TEST_REQUIRE(!plugins.empty());
    BOOST_TEST(plugins[0].as_object().at("id").as_string() == "fixture_second_good");
    BOOST_TEST(plugins[0].as_object().at("origin").as_string() == "--plugin");
    BOOST_TEST(plugins[0].as_object().at("provides").as_array().size() == 2u);
    BOOST_TEST(!doc.at("rejected").as_array().empty());
}

// Adapters list the releases `synth --family` also takes (docs/families.md, "Releases"), with
// the model type each one's config.json says.
BOOST_AUTO_TEST_CASE(plugins_lists_the_releases_adapters_synthesize) {
    auto table = run_moequant({"plugins"});
    BOOST_TEST_REQUIRE(table.exit_code == 0, table.err);
    for (const char* line : {"release minimax_m27", "release kimi_k26"})
        BOOST_TEST(contains(table.out, line), line << " missing in:\n" << table.out);
    auto r = run_moequant({"plugins", "--json"});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    const boost::json::value doc = boost::json::parse(r.out);
    std::map<std::string, std::string> releases;  // name -> model_type
    for (const auto& plugin : doc.at("plugins").as_array())
        for (const auto& object : plugin.at("provides").as_array())
            if (const auto* listed = object.as_object().if_contains("synth_releases"))
                for (const auto& release : listed->as_array())
                    releases[std::string(release.at("name").as_string())] = release.at("model_type").as_string();
    BOOST_TEST(releases["minimax_m27"] == "minimax_m2");
    BOOST_TEST(releases["kimi_k26"] == "kimi_k25");
}

// An adapter that does not implement synthesize() (the fixture's) refuses `synth` as a usage error.
BOOST_AUTO_TEST_CASE(synth_of_a_family_without_synthesis_is_exit_2) {
    TempDir dir;
    expect_failure(run_moequant({"synth", "--no-default-plugins", "--plugin", fixture_plugin("second_good"), "--family",
                                 "fixture-family", "--out", (dir.path() / "out").string()}),
                   2, {"family 'fixture-family' cannot synthesize a checkpoint", "NoSynthesis"});
    BOOST_TEST(!fs::exists(dir.path() / "out"));
}

BOOST_AUTO_TEST_CASE(a_rejected_explicit_plugin_is_exit_4) {
    expect_failure(run_moequant({"plugins", "--no-default-plugins", "--plugin", fixture_plugin("abi_plus_one")}), 4,
                   {"plugin rejected", "moequant-quantizer-fixture_abi_plus_one.so", "ABI"});
    auto path = (fixtures_dir() / "safetensors_cpp_testdata/gen/model.safetensors").string();
    expect_failure(run_moequant({"inspect", path, "--plugin", "/nonexistent/moequant-x.so"}), 4, {"no such file"});
    expect_failure(run_moequant({"plugins", "--plugin-dir", "/nonexistent/dir"}), 4, {"plugin folder does not exist"});
}

BOOST_AUTO_TEST_CASE(environment_plugin_path_is_searched) {
    auto r = run_moequant({"plugins", "--json"}, {"MOEQUANT_PLUGIN_PATH=/nonexistent:" + std::string(MOEQUANT_TEST_PLUGIN_DIR)});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    BOOST_TEST(contains(r.out, "\"origin\":\"MOEQUANT_PLUGIN_PATH\""));
    auto off = run_moequant({"plugins", "--json", "--no-default-plugins"}, {"MOEQUANT_PLUGIN_PATH=" + std::string(MOEQUANT_TEST_PLUGIN_DIR)});
    BOOST_TEST(!contains(off.out, "fixture_good"));
}

// The host looks in lib/moequant/plugins next to its own bin/ folder (build and install trees
// share that layout): a copy of the host in a fresh tree finds a module dropped there.
BOOST_AUTO_TEST_CASE(the_plugin_folder_next_to_the_executable_is_searched) {
    TempDir tree;
    fs::create_directories(tree / "bin");
    fs::create_directories(tree / "lib/moequant/plugins");
    fs::copy_file(host_executable(), tree / "bin/moequant");
    fs::copy_file(fixture_plugin("good"), tree / "lib/moequant/plugins/moequant-quantizer-fixture_good.so");
    auto r = run_command({(tree / "bin/moequant").string(), "plugins", "--json"}, {"MOEQUANT_PLUGIN_PATH="});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
    BOOST_TEST(contains(r.out, "\"origin\":\"default\""), r.out);
    BOOST_TEST(contains(r.out, (tree / "lib/moequant/plugins/moequant-quantizer-fixture_good.so").string()), r.out);
    auto off = run_command({(tree / "bin/moequant").string(), "plugins", "--json", "--no-default-plugins"});
    BOOST_TEST(!contains(off.out, "fixture_good"));
}

BOOST_AUTO_TEST_CASE(plugin_debug_traces_every_candidate) {
    auto r = run_moequant({"plugins", "--no-default-plugins", "--plugin", fixture_plugin("good")}, {"MOEQUANT_PLUGIN_DEBUG=1"});
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(contains(r.err, "moequant: plugins: trying"));
    BOOST_TEST(contains(r.err, "moequant: plugins: loaded 'fixture_good'"));
}

BOOST_AUTO_TEST_SUITE_END()
