// Issue 18's drop-in promise: every example command line of kt-kernel's documentation, as
// docs/seed-tools.md §4 quotes it byte for byte, runs under moequant with only the script
// replaced (`python …/convert_cpu_weights.py` -> `moequant convert`, `…convert_gpu_weights.py`
// -> `moequant gptq`) and its absolute paths moved under a temporary root, where a synthesized
// model of the family and encoding the command names stands at every input path. The commands
// run through bash, quotes, comments and line continuations as written; the Hub datasets they
// name come from a local Hugging Face cache made here (JSONL files, as the issue's offline
// lookup reads them).
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

using namespace moequant::test;

namespace {

// One example of §4: its `#### ` heading and the lines under it.
struct SeedExample {
    std::string heading;
    std::vector<std::string> lines;
};

// The examples of docs/seed-tools.md §4, every ```text block split at its `#### ` headings.
std::vector<SeedExample> seed_examples() {
    std::istringstream doc(read_text(fs::path(MOEQUANT_SOURCE_DIR) / "docs" / "seed-tools.md"));
    std::vector<SeedExample> examples;
    bool in_section = false, in_block = false;
    for (std::string line; std::getline(doc, line);) {
        if (line.starts_with("## ")) in_section = line.starts_with("## 4.");
        if (!in_section) continue;
        if (line.starts_with("```")) {
            in_block = !in_block;
            continue;
        }
        if (!in_block) continue;
        if (line.starts_with("#### "))
            examples.push_back({line.substr(5), {}});
        else if (!examples.empty())
            examples.back().lines.push_back(line);
    }
    return examples;
}

std::string trimmed(const std::string& s) {
    const auto first = s.find_first_not_of(' ');
    return first == std::string::npos ? "" : s.substr(first);
}

// The shell commands of an example: each line starting `python ` or `cd `, with the lines its
// trailing backslashes continue onto (prose lines of a docstring are not commands).
std::vector<std::string> commands_of(const SeedExample& example) {
    std::vector<std::string> commands;
    bool continued = false;
    for (const std::string& line : example.lines) {
        const std::string t = trimmed(line);
        if (continued)
            commands.back() += "\n" + line;
        else if (t.starts_with("python ") || t.starts_with("cd "))
            commands.push_back(line);
        else
            continue;
        continued = !line.empty() && line.back() == '\\';
    }
    return commands;
}

// The command with the seed script replaced by the host and every absolute path (/path/…,
// /mnt/…) moved under $ROOT.
std::string as_moequant(std::string command) {
    for (const auto& [script, subcommand] : {std::pair{"convert_cpu_weights.py", "convert"}, {"convert_gpu_weights.py", "gptq"}}) {
        const std::size_t at = command.find(script);
        if (at == std::string::npos) continue;
        const std::size_t python = command.rfind("python ", at);
        BOOST_REQUIRE(python != std::string::npos);
        command.replace(python, at + std::string(script).size() - python, std::string("\"$MOEQUANT\" ") + subcommand);
    }
    std::string out;
    for (std::size_t i = 0; i < command.size(); ++i) {
        const bool starts_path = command[i] == '/' && (i == 0 || std::isspace(static_cast<unsigned char>(command[i - 1])) ||
                                                        command[i - 1] == '"');
        if (starts_path && (command.compare(i, 6, "/path/") == 0 || command.compare(i, 5, "/mnt/") == 0)) out += "$ROOT";
        out += command[i];
    }
    return out;
}

// The value after `flag` in a command's words, or "".
std::string flag_value(const std::string& command, const std::string& flag) {
    std::istringstream words(command);
    for (std::string w; words >> w;)
        if (w == flag && words >> w) return w;
    return "";
}

// The family a path names, as the model it stands for (the examples name real releases).
std::string family_of(std::string path) {
    std::transform(path.begin(), path.end(), path.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (path.find("deepseek-v3.2") != std::string::npos) return "deepseek_v32";
    if (path.find("deepseek") != std::string::npos) return "deepseek_v3";
    if (path.find("qwen3-next") != std::string::npos) return "qwen3_next";
    if (path.find("glm-4.5") != std::string::npos) return "glm4_moe";
    if (path.find("kimi") != std::string::npos) return "kimi_k2";
    return "qwen3_moe";
}

// A model at every input path of the commands (rooted at `root`), in the encoding --input-type
// names (BF16 for gptq), and the folders a `cd` enters.
void make_inputs(const fs::path& root, const std::vector<std::string>& commands) {
    for (const std::string& command : commands) {
        if (trimmed(command).starts_with("cd $ROOT/")) {
            fs::create_directories(root / trimmed(command).substr(9));
            continue;
        }
        std::string input = flag_value(command, "--input-path");
        if (input.empty()) input = flag_value(command, "--model_id");
        if (input.empty() || !input.starts_with("$ROOT/")) continue;
        fs::path model = root / fs::path(input.substr(6));
        if (!model.has_filename()) model = model.parent_path();  // "DeepSeek-R1-0528/"
        if (fs::exists(model)) continue;
        const std::string type = flag_value(command, "--input-type");
        fs::create_directories(model.parent_path());
        auto made = run_moequant({"synth", "--family", family_of(input), "--dtype", type.empty() ? "bf16" : type, "--out", model.string()});
        BOOST_REQUIRE_MESSAGE(made.exit_code == 0, input << ": " << made.err);
    }
}

// A Hugging Face hub cache holding the two datasets the examples name, each as a Hub dataset
// repository lays out its files (data/<split>-NNNNN-of-NNNNN.<ext>), refs/main naming the
// snapshot: ultrachat_200k's chat rows, alpaca's instruction rows (which carry a "text" column).
void make_hub_cache(const fs::path& hub) {
    auto dataset = [&](const std::string& repo, const std::string& file, const std::string& rows) {
        const fs::path folder = hub / ("datasets--" + repo);
        const std::string snapshot = "0123456789abcdef0123456789abcdef01234567";
        fs::create_directories(folder / "refs");
        fs::create_directories(folder / "snapshots" / snapshot / "data");
        write_text(folder / "refs" / "main", snapshot);
        write_text(folder / "snapshots" / snapshot / "data" / file, rows);
    };
    std::string chats, instructions;
    for (int i = 0; i < 6; ++i) {
        const std::string n = std::to_string(i);
        chats += R"({"prompt": "Question )" + n + R"(", "messages": [{"role": "user", "content": "What is the capital of country )" + n +
                 R"(?"}, {"role": "assistant", "content": "It is the city on the river, as every atlas says."}]})" "\n";
        instructions += R"({"instruction": "Name a colour.", "input": "", "output": "Blue )" + n +
                        R"(", "text": "Below is an instruction. Name a colour. Response: Blue )" + n + R"(."})" "\n";
    }
    dataset("HuggingFaceH4--ultrachat_200k", "train_sft-00000-of-00001.jsonl", chats);
    dataset("tatsu-lab--alpaca", "train-00000-of-00001.jsonl", instructions);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(seed_commands)

BOOST_AUTO_TEST_CASE(every_documented_seed_command_runs_unchanged) {
    const std::vector<SeedExample> examples = seed_examples();
    // §4 as recorded: 14 examples in kt-kernel/scripts/README.md, 3 in kt-kernel/README.md, the
    // DeepSeek-V3.2 tutorial, the SFT guide, the two scripts' own usage texts.
    BOOST_REQUIRE_EQUAL(examples.size(), 21u);
    std::size_t commands_run = 0;
    for (const SeedExample& example : examples) {
        BOOST_TEST_CONTEXT(example.heading) {
            const std::vector<std::string> commands = commands_of(example);
            BOOST_REQUIRE(!commands.empty());
            TempDir root;
            std::string script = "set -e\ncd \"$ROOT\"\n";
            std::vector<std::string> rewritten;
            for (const std::string& c : commands) {
                rewritten.push_back(as_moequant(c));
                script += rewritten.back() + "\n";
            }
            make_inputs(root.path(), rewritten);
            make_hub_cache(root / "hub");
            auto r = run_command({"/bin/bash", "-c", script}, {"MOEQUANT=" + host_executable().string(), "ROOT=" + root.path().string(),
                                                              "HF_HUB_CACHE=" + (root / "hub").string()});
            // The SFT guide's command (§4 marks it stale) names flags convert_cpu_weights.py
            // never had: argparse stops it with exit 2, and so does moequant.
            if (contains(example.heading, "(stale")) {
                BOOST_TEST(r.exit_code == 2, r.err);
                BOOST_TEST(contains(r.err, "--base_path"), r.err);
                continue;
            }
            BOOST_TEST(r.exit_code == 0, script << "\n" << r.err);
            commands_run += rewritten.size();
            // A Hub id calibrates on the cached rows (6 of them), not on the embedded text.
            for (const std::string& c : rewritten)
                if (std::string id = flag_value(c, "--dataset"); !id.empty()) {
                    id.erase(std::remove(id.begin(), id.end(), '"'), id.end());
                    BOOST_TEST(contains(r.err, "calibration: 6 sample(s)"), r.err);
                    BOOST_TEST(contains(r.err, " of " + id + ","), r.err);
                }
            // The outputs are complete ones: every output folder verifies against its source.
            for (const std::string& c : rewritten) {
                const std::string out = flag_value(c, c.find(" gptq") != std::string::npos ? "--output_dir" : "--output");
                std::string in = flag_value(c, "--input-path");
                if (in.empty()) in = flag_value(c, "--model_id");
                if (out.empty() || r.exit_code != 0) continue;
                auto path = [&](const std::string& p) { return (root.path() / fs::path(p.substr(6))).string(); };
                auto v = run_moequant({"verify", "--source", path(in), "--converted", path(out), "--quiet"});
                BOOST_TEST(v.exit_code == 0, c << "\n" << v.out << v.err);
            }
        }
    }
    BOOST_TEST(commands_run == 25u);  // the tutorial's cd and 24 conversions
}

BOOST_AUTO_TEST_SUITE_END()
