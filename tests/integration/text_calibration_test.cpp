// Built-in calibration end to end: for every family, synth -> gptq --dataset embedded (the
// model's tokenizer, its decoder forward layer by layer, GPTQ on each MoE layer's inputs, the
// layer recomputed with its quantized experts) -> verify passes on the activations it saved;
// on held-out text recorded with `record`, GPTQ's output error is below RTN's; the first MoE
// layer's saved inputs equal the unquantized model's and later ones differ (they follow the
// quantized layers); reruns are byte-identical; bad requests fail with one line.
#include "checkpoint_rewrite.hpp"
#include "test_support.hpp"

#include <moequant/safetensors_reader.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

struct Family {
    std::string name, dtype;
    std::vector<std::string> limits = {};  // calibration options the family needs (DeepSeek-V3.2: index_topk)
};

const std::vector<Family> families = {
    {"qwen3_moe", "bf16"},   {"qwen3_next", "bf16"}, {"mixtral", "bf16"},       {"glm4_moe", "bf16"},
    {"deepseek_v3", "fp8"},  {"kimi_k2", "fp8"},     {"minimax_m2", "fp8"},     {"kimi_k25", "int4-ct"},
    {"deepseek_v32", "fp8", {"--max_sequence_length", "64"}},
    {"qwen3_5_moe", "bf16"},
    {"glm_moe_dsa", "bf16", {"--max_sequence_length", "48"}},
};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

double sum_of(const json::value& report, const char* key) {
    double sum = 0;
    for (const auto& part : report.at("tensors").as_array()) sum += part.at(key).to_number<double>();
    return sum;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(text_calibration)

BOOST_AUTO_TEST_CASE(every_family_calibrates_on_text_and_verifies) {
    for (const Family& f : families) {
        BOOST_TEST_CONTEXT(f.name) {
            TempDir dir;
            auto synth = run_moequant({"synth", "--family", f.name, "--dtype", f.dtype, "--out", (dir / "m").string()});
            BOOST_REQUIRE_MESSAGE(synth.exit_code == 0, synth.err);
            auto gptq = run_moequant(with({"gptq", "--model_id", (dir / "m").string(), "--output_dir", (dir / "o").string(),
                                           "--dataset", "embedded", "--save-activations", (dir / "acts.safetensors").string()},
                                          f.limits));
            BOOST_REQUIRE_MESSAGE(gptq.exit_code == 0, gptq.err);
            BOOST_TEST(gptq.err.find("run through the model layer by layer") != std::string::npos, gptq.err);
            auto verify = run_moequant({"verify", "--source", (dir / "m").string(), "--converted", (dir / "o").string(),
                                        "--quiet", "--calibration-activations", (dir / "acts.safetensors").string()});
            BOOST_TEST(verify.exit_code == 0, verify.out << verify.err);

            // Held-out text through the unquantized model: GPTQ's output error stays below RTN's.
            write_text(dir / "held_out.jsonl", held_out_jsonl);
            auto record = run_moequant(with({"record", "--model_id", (dir / "m").string(), "--dataset",
                                             (dir / "held_out.jsonl").string(), "--output", (dir / "held.safetensors").string(), "-q"},
                                            f.limits));
            BOOST_REQUIRE_MESSAGE(record.exit_code == 0, record.err);
            auto held = run_moequant({"verify", "--source", (dir / "m").string(), "--converted", (dir / "o").string(),
                                      "--json", "--quiet", "--calibration-activations", (dir / "held.safetensors").string()});
            const json::value report = json::parse(held.out);
            BOOST_TEST(sum_of(report, "output_error") < sum_of(report, "reference_output_error"));

            // The first MoE layer's inputs do not depend on any quantization; later ones do.
            auto embedded = run_moequant(with({"record", "--model_id", (dir / "m").string(), "--dataset", "embedded", "--output",
                                               (dir / "plain.safetensors").string(), "-q"},
                                              f.limits));
            BOOST_REQUIRE(embedded.exit_code == 0);
            const SafetensorsFile saved = SafetensorsFile::open(dir / "acts.safetensors");
            const SafetensorsFile plain = SafetensorsFile::open(dir / "plain.safetensors");
            std::vector<std::string> layers;
            for (const auto& t : saved.tensors())
                if (t.name.ends_with(".moe_input")) layers.push_back(t.name);
            std::sort(layers.begin(), layers.end(), [](const std::string& a, const std::string& b) {
                return std::stoi(a.substr(7)) < std::stoi(b.substr(7));
            });
            BOOST_REQUIRE(layers.size() >= 2u);
            auto same = [&](const std::string& name) {
                const TensorView a = saved.view(name), b = plain.view(name);
                return a.size_bytes() == b.size_bytes() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
            };
            BOOST_TEST(same(layers.front()));
            BOOST_TEST(!same(layers.back()));
        }
    }
}

BOOST_AUTO_TEST_CASE(a_rerun_gives_the_same_bytes_and_another_seed_another_job) {
    TempDir dir;
    BOOST_REQUIRE(run_moequant({"synth", "--family", "qwen3_moe", "--out", (dir / "m").string()}).exit_code == 0);
    const std::vector<std::string> args = {"gptq", "--model_id", (dir / "m").string(), "--output_dir", (dir / "o").string(),
                                           "--dataset", "embedded", "--num_calibration_samples", "8", "-q"};
    BOOST_REQUIRE(run_moequant(args).exit_code == 0);
    const auto first = file_hashes(dir / "o");
    BOOST_TEST(run_moequant(args).exit_code == 0);
    BOOST_TEST((file_hashes(dir / "o") == first));
    auto one_thread = args;
    one_thread[4] = (dir / "one").string();
    one_thread.insert(one_thread.end(), {"--threads", "1"});
    BOOST_REQUIRE(run_moequant(one_thread).exit_code == 0);
    BOOST_TEST((file_hashes(dir / "one") == first));  // the bytes do not depend on the thread count
    auto seeded = args;
    seeded.insert(seeded.end(), {"--random_seed", "7"});
    auto refused = run_moequant(seeded);
    BOOST_TEST(refused.exit_code == 5, refused.err);  // another calibration set: not this folder's job
    // Under a tiny memory budget: file-backed hidden states, one sample per batch; it verifies
    // on the inputs it calibrated with (the BLAS may round batch-sized products differently).
    auto bounded = args;
    bounded[4] = (dir / "bounded").string();
    bounded.pop_back();  // -q: the note says how it ran
    bounded.insert(bounded.end(), {"--max-memory", "0.0001", "--save-activations", (dir / "b.safetensors").string()});
    auto run = run_moequant(bounded);
    BOOST_REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    BOOST_TEST(run.err.find("in 8 batch(es), hidden states in a scratch file") != std::string::npos, run.err);
    auto verify = run_moequant({"verify", "--source", (dir / "m").string(), "--converted", (dir / "bounded").string(), "--quiet",
                                "--calibration-activations", (dir / "b.safetensors").string()});
    BOOST_TEST(verify.exit_code == 0, verify.out << verify.err);
}

BOOST_AUTO_TEST_CASE(bad_text_calibration_requests_fail_with_one_line) {
    TempDir dir;
    BOOST_REQUIRE(run_moequant({"synth", "--family", "mixtral", "--out", (dir / "m").string()}).exit_code == 0);
    auto gptq = [&](const fs::path& model, std::vector<std::string> extra) {
        std::vector<std::string> args = {"gptq", "--model_id", model.string(), "--output_dir", (dir / "o").string(), "-q"};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_moequant(args);
    };
    write_text(dir / "bad.jsonl", "{\"text\": \"fine\"}\n{\"messages\": 3}\n");
    auto bad = gptq(dir / "m", {"--dataset", (dir / "bad.jsonl").string()});
    BOOST_TEST(bad.exit_code == 3, bad.err);
    BOOST_TEST(bad.err.find("line 2") != std::string::npos, bad.err);
    BOOST_TEST(!fs::exists(dir / "o"));
    rewrite(dir / "m", dir / "no_tokenizer", [](const std::string&, std::optional<Replacement>&) { return true; });
    fs::remove(dir / "no_tokenizer" / "tokenizer.json");
    auto untokenized = gptq(dir / "no_tokenizer", {"--dataset", "embedded"});
    BOOST_TEST(untokenized.exit_code == 3, untokenized.err);
    BOOST_TEST(untokenized.err.find("MissingTokenizer") != std::string::npos, untokenized.err);
    BOOST_TEST(gptq(dir / "m", {"--dataset", "embedded", "--calibration-activations", "x"}).exit_code == 2);
    BOOST_TEST(gptq(dir / "m", {"--quant_method", "RTN", "--save-activations", (dir / "a").string()}).exit_code == 2);
    BOOST_TEST(!fs::exists(dir / "o"));
}

// --dataset_split as the seed tool's load_dataset(folder, split=...): a folder's <split>.jsonl or
// <split>/*.jsonl, and of the rows the ones whose "split" is it (rows without one belong to
// every split); train_sft by default; what is missing is named with the splits there are.
BOOST_AUTO_TEST_CASE(dataset_splits_choose_files_and_rows) {
    TempDir dir;
    BOOST_REQUIRE(run_moequant({"synth", "--family", "qwen3_moe", "--out", (dir / "m").string()}).exit_code == 0);
    auto record = [&](const std::string& dataset, std::vector<std::string> extra) {
        std::vector<std::string> args = {"record", "--model_id", (dir / "m").string(), "--dataset", dataset,
                                         "-o", (dir / "r.safetensors").string(), "--overwrite", "-q"};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_moequant(args);
    };
    auto samples = [](const CommandResult& r) {
        BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
        const auto at = r.out.find(" sample(s)");
        BOOST_TEST_REQUIRE(at != std::string::npos, r.out);
        return std::stoi(r.out.substr(r.out.rfind(' ', at - 1) + 1));
    };
    const std::string row = "{\"text\": \"a row of calibration text\"}\n";
    fs::create_directories(dir / "ds" / "train");
    write_text(dir / "ds" / "train_sft.jsonl", row + row + row);
    write_text(dir / "ds" / "train" / "a.jsonl", row);
    write_text(dir / "ds" / "train" / "b.jsonl", row + row);
    BOOST_TEST(samples(record((dir / "ds").string(), {})) == 3);  // train_sft.jsonl by default
    BOOST_TEST(samples(record((dir / "ds").string(), {"--dataset_split", "train"})) == 3);  // train/a + train/b
    write_text(dir / "mixed.jsonl", "{\"text\": \"one\", \"split\": \"test\"}\n{\"text\": \"two\", \"split\": \"train\"}\n" +
                                        std::string("{\"text\": \"three\", \"split\": \"train\"}\n{\"text\": \"every split\"}\n"));
    BOOST_TEST(samples(record((dir / "mixed.jsonl").string(), {"--dataset_split", "train"})) == 3);
    BOOST_TEST(samples(record((dir / "mixed.jsonl").string(), {"--dataset_split", "test"})) == 2);
    // A Hub dataset repository's layout: data/<split>-NNNNN-of-NNNNN.jsonl, one JSON array per
    // file allowed; another split's files and hidden folders are not read.
    fs::create_directories(dir / "hub" / "data");
    fs::create_directories(dir / "hub" / ".cache");
    write_text(dir / "hub" / "data" / "train_sft-00000-of-00002.jsonl", row + row);
    write_text(dir / "hub" / "data" / "train_sft-00001-of-00002.json", "[{\"text\": \"one\"}, {\"text\": \"two\"}, {\"text\": \"3\"}]");
    write_text(dir / "hub" / "data" / "test-00000-of-00001.jsonl", row);
    write_text(dir / "hub" / ".cache" / "train_sft.jsonl", row + row + row + row);
    BOOST_TEST(samples(record((dir / "hub").string(), {})) == 5);
    BOOST_TEST(samples(record((dir / "hub").string(), {"--dataset_split", "test"})) == 1);
    write_text(dir / "array.json", "[{\"text\": \"one\"}, 7]");

    auto refused = [&](const CommandResult& r, const std::string& reason) {
        BOOST_TEST(r.exit_code == 3);
        BOOST_TEST(r.err.find(reason) != std::string::npos, r.err);
        BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    };
    refused(record((dir / "ds").string(), {"--dataset_split", "test"}),
            "has no split 'test' (no test.jsonl, no JSON/JSONL file named test-* or under a test folder) (BadDataset); hint: it holds: train, train_sft");
    refused(record((dir / "ds").string(), {"--dataset_split", "../ds"}), "'../ds' is not a split name");
    write_text(dir / "only_test.jsonl", "{\"text\": \"one\", \"split\": \"test\"}\n");
    refused(record((dir / "only_test.jsonl").string(), {}), "has no row of split 'train_sft' (BadDataset); hint: its rows' splits: test");
    write_text(dir / "bad_split.jsonl", "{\"text\": \"one\", \"split\": 3}\n");
    refused(record((dir / "bad_split.jsonl").string(), {}), "line 1: \"split\" is not a string");
    refused(record((dir / "array.json").string(), {}), "row 2");

    // A split's file that is not a regular file is refused by name, never skipped or opened in
    // a way that blocks: a link to a device, a FIFO (docs/safety.md).
    fs::create_directories(dir / "special" / "data");
    write_text(dir / "special" / "data" / "train_sft-00002.jsonl", row);
    fs::create_symlink("/dev/zero", dir / "special" / "data" / "train_sft-00000.jsonl");
    refused(record((dir / "special").string(), {}), "train_sft-00000.jsonl");
    fs::remove(dir / "special" / "data" / "train_sft-00000.jsonl");
    BOOST_REQUIRE(::mkfifo((dir / "special" / "data" / "train_sft-00001.jsonl").c_str(), 0644) == 0);
    const auto fifo = record((dir / "special").string(), {});
    refused(fifo, "train_sft-00001.jsonl");
    BOOST_TEST(fifo.err.find("NotARegularFile") != std::string::npos, fifo.err);
    fs::create_directories(dir / "fifo_split");
    BOOST_REQUIRE(::mkfifo((dir / "fifo_split" / "train_sft.jsonl").c_str(), 0644) == 0);
    refused(record((dir / "fifo_split").string(), {}), "NotARegularFile");
}

// The scratch folder's parent is checked before any work: an unusable TMPDIR is one line and exit
// 5 for every command that makes scratch files, never an internal error; no output is left.
BOOST_AUTO_TEST_CASE(an_unusable_tmpdir_is_refused_before_any_work) {
    TempDir dir;
    BOOST_REQUIRE(run_moequant({"synth", "--family", "qwen3_moe", "--out", (dir / "m").string()}).exit_code == 0);
    BOOST_REQUIRE(run_moequant({"convert", "-i", (dir / "m").string(), "-o", (dir / "int4").string(), "-q"}).exit_code == 0);
    write_text(dir / "a_file", "not a folder");
    const std::string m = (dir / "m").string();
    const std::vector<std::pair<std::string, std::string>> tmpdirs = {
        {"TMPDIR=", "is set but empty"},
        {"TMPDIR=" + (dir / "missing").string(), "cannot be used: No such file or directory"},
        {"TMPDIR=" + (dir / "a_file").string(), "is not a folder"}};
    const std::vector<std::vector<std::string>> commands = {
        {"gptq", "--model_id", m, "--quant_type", "W4A16", "--dataset", "embedded", "-o", (dir / "g").string()},
        {"convert", "-i", m, "--calibrate", "--dataset", "embedded", "-o", (dir / "c").string()},
        {"record", "--model_id", m, "--dataset", "embedded", "-o", (dir / "r.safetensors").string()},
        {"eval", "--model_id", m, "--dataset", "embedded", "--cpu-weights", (dir / "int4").string()}};
    for (const auto& [env, reason] : tmpdirs)
        for (const auto& command : commands) {
            BOOST_TEST_CONTEXT(env << " " << command[0]) {
                const CommandResult r = run_moequant(command, {env});
                BOOST_TEST(r.exit_code == 5, r.err);
                BOOST_TEST(r.err.find(reason) != std::string::npos, r.err);
                BOOST_TEST(r.err.find("BadTmpdir") != std::string::npos, r.err);
                BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
            }
        }
    BOOST_TEST(!fs::exists(dir / "g"));
    BOOST_TEST(!fs::exists(dir / "c"));
    BOOST_TEST(!fs::exists(dir / "r.safetensors"));
}

BOOST_AUTO_TEST_SUITE_END()
