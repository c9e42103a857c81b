// Calibration data from text: JSONL rows of "text" or chat "messages", shuffled with a seed,
// selected, tokenized without special tokens and truncated; bad rows named by line; the
// embedded default; and each family adapter's chat format.
#include "test_support.hpp"

#include <moequant/engine/calibration_dataset.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/error.hpp>
#include <moequant/model_config.hpp>

#include <boost/test/unit_test.hpp>

#include <set>

using namespace moequant;
using namespace moequant::test;

namespace {

const Tokenizer& mistral() {
    static const Tokenizer t = Tokenizer::load(fs::path(MOEQUANT_TOKENIZER_UNPACKED_DIR) / "llama2" / "tokenizer.json");
    return t;
}

ChatTemplate bracket_template() {
    ChatTemplate t;
    t.begin = "<s>";
    t.user = {"[INST] ", " [/INST]"};
    t.assistant = {"", "</s>"};
    return t;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return std::string(e.context().code) + ": " + e.what();
    }
    return "none";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(calibration_dataset)

BOOST_AUTO_TEST_CASE(rows_are_rendered_shuffled_selected_and_truncated) {
    TempDir dir;
    std::string jsonl;
    std::vector<std::string> texts;
    for (int i = 0; i < 12; ++i) {
        const std::string text = "Sample number " + std::to_string(i) + " talks about experts and routers.";
        texts.push_back(text);
        jsonl += "{\"text\": \"" + text + "\"}\n";
    }
    jsonl += "\n{\"messages\": [{\"role\": \"user\", \"content\": \"Hi?\"}, {\"role\": \"assistant\", \"content\": \"Hello.\"}]}\r\n";
    texts.push_back("<s>[INST] Hi? [/INST]Hello.</s>");
    write_text(dir / "data.jsonl", jsonl);

    DatasetSelection all{0, 0, 7};
    const CalibrationSamples every = load_calibration_dataset(dir / "data.jsonl", mistral(), bracket_template(), all);
    BOOST_TEST(every.rows == 13);
    BOOST_REQUIRE(every.samples.size() == 13u);
    // Each sample is one row's text tokenized without special tokens; together they are every row once.
    std::multiset<std::vector<std::int32_t>> want, got(every.samples.begin(), every.samples.end());
    for (const auto& t : texts) want.insert(mistral().encode(t, false));
    BOOST_TEST((got == want));
    BOOST_TEST((every.samples != [&] {
        std::vector<std::vector<std::int32_t>> in_file;
        for (const auto& t : texts) in_file.push_back(mistral().encode(t, false));
        return in_file;
    }()));  // shuffled

    // The same seed gives the same order; the first N of it are the selection.
    const CalibrationSamples five = load_calibration_dataset(dir / "data.jsonl", mistral(), bracket_template(), {5, 0, 7});
    BOOST_REQUIRE(five.samples.size() == 5u);
    for (std::size_t i = 0; i < 5; ++i) BOOST_TEST((five.samples[i] == every.samples[i]));
    const CalibrationSamples other = load_calibration_dataset(dir / "data.jsonl", mistral(), bracket_template(), {0, 0, 8});
    BOOST_TEST((other.samples != every.samples));

    const CalibrationSamples cut = load_calibration_dataset(dir / "data.jsonl", mistral(), bracket_template(), {0, 6, 7});
    BOOST_TEST(cut.truncated == 13);
    for (std::size_t i = 0; i < cut.samples.size(); ++i) {
        BOOST_TEST(cut.samples[i].size() == 6u);
        BOOST_TEST((std::vector<std::int32_t>(every.samples[i].begin(), every.samples[i].begin() + 6) == cut.samples[i]));
    }
    BOOST_TEST(cut.tokens() == 6 * 13);
}

BOOST_AUTO_TEST_CASE(bad_rows_are_refused_naming_the_line) {
    TempDir dir;
    auto error_for = [&](const std::string& second_line) {
        write_text(dir / "d.jsonl", "{\"text\": \"fine\"}\n" + second_line + "\n");
        return error_of([&] { load_calibration_dataset(dir / "d.jsonl", mistral(), bracket_template(), {}); });
    };
    for (const auto& [line, says] : std::vector<std::pair<std::string, std::string>>{
             {"{\"text\": ", "not valid JSON"},
             {"[1, 2]", "not a JSON object"},
             {"{\"title\": \"x\"}", "neither \"text\" nor \"messages\""},
             {"{\"text\": 5}", "\"text\" is not a string"},
             {"{\"messages\": []}", "not a non-empty list"},
             {"{\"messages\": [{\"role\": \"user\"}]}", "{\"role\": string, \"content\": string}"},
             {"{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}", "role 'tool'"}}) {
        const std::string e = error_for(line);
        BOOST_TEST(e.find("BadDataset") == 0u, e);
        BOOST_TEST(e.find("line 2") != std::string::npos, e);
        BOOST_TEST(e.find(says) != std::string::npos, e);
    }
    write_text(dir / "empty.jsonl", "\n\n{\"text\": \"\"}\n");
    const std::string e = error_of([&] { load_calibration_dataset(dir / "empty.jsonl", mistral(), bracket_template(), {}); });
    BOOST_TEST(e.find("holds no text") != std::string::npos, e);
    BOOST_TEST(error_of([&] { load_calibration_dataset(dir / "missing.jsonl", mistral(), bracket_template(), {}); })
                   .find("NotFound") == 0u);
}

BOOST_AUTO_TEST_CASE(the_embedded_default_gives_one_sample_per_paragraph) {
    const std::vector<std::string> paragraphs = embedded_calibration_paragraphs();
    BOOST_TEST(paragraphs.size() >= 8u);
    const CalibrationSamples s = tokenize_calibration_texts(paragraphs, mistral(), {});
    BOOST_TEST(s.samples.size() == paragraphs.size());
    BOOST_TEST(s.tokens() > 1000);
}

// Each family's conversation format, as docs/calibration.md documents it.
BOOST_AUTO_TEST_CASE(family_chat_formats) {
    Registry registry;
    for (const char* family : {"deepseek_v3", "qwen3_moe", "qwen3_next", "mixtral", "glm4_moe", "minimax_m2"})
        registry.load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / ("moequant-adapter-" + std::string(family) + ".so"),
                           PluginOrigin::explicit_file);
    BOOST_REQUIRE(registry.rejections().empty());
    const std::vector<ChatMessage> chat = {{"system", "S"}, {"user", "U"}, {"assistant", "A"}};
    auto render = [&](const char* family, const char* model_type) {
        const ModelConfig config = ModelConfig::parse("{\"model_type\": \"" + std::string(model_type) + "\"}", "config.json");
        return registry.adapter(family)->chat_template(config).render(chat);
    };
    BOOST_TEST(render("deepseek_v3", "deepseek_v3") ==
               "<\uff5cbegin\u2581of\u2581sentence\uff5c>S<\uff5cUser\uff5c>U<\uff5cAssistant\uff5c>A<\uff5cend\u2581of\u2581sentence\uff5c>");
    BOOST_TEST(render("deepseek_v3", "kimi_k2") ==
               "<|im_system|>system<|im_middle|>S<|im_end|><|im_user|>user<|im_middle|>U<|im_end|>"
               "<|im_assistant|>assistant<|im_middle|>A<|im_end|>");
    const std::string chatml = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n";
    BOOST_TEST(render("qwen3_moe", "qwen3_moe") == chatml);
    BOOST_TEST(render("qwen3_next", "qwen3_next") == chatml);
    BOOST_TEST(render("mixtral", "mixtral") == "<s>S\n\n[INST] U [/INST]A</s>");
    BOOST_TEST(render("glm4_moe", "glm4_moe") == "[gMASK]<sop><|system|>\nS<|user|>\nU<|assistant|>\nA");
    BOOST_TEST(render("minimax_m2", "minimax_m2") == "]~!b[]~b]system\nS[e~[\n]~b]user\nU[e~[\n]~b]ai\nA[e~[\n");
}

BOOST_AUTO_TEST_SUITE_END()
