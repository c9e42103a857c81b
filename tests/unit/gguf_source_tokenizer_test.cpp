// The tokenizer a GGUF read as a checkpoint gets (formats/gguf/gguf_source_tokenizer): the real
// Qwen3 and DeepSeek-V3 tokenizers (unpacked into the build tree from tests/data/tokenizers) written
// as llama.cpp's converter writes them (gguf_bpe_vocab, pre-tokenizers qwen2 and deepseek-v3), then
// rebuilt from those keys alone, tokenize every text of tests/data/tokenizers/texts.json — English,
// digits, whitespace runs, CJK, Cyrillic, Arabic, emoji — to the ids of the original tokenizer.json,
// with and without the special tokens. What is not rebuilt says why.
#include "gguf_source_tokenizer.hpp"
#include "gguf_vocab.hpp"

#include "test_support.hpp"

#include <moequant/engine/tokenizer.hpp>
#include <moequant/error.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

using namespace moequant;
using namespace moequant::formats;
using namespace moequant::test;

namespace {

const fs::path unpacked_dir = MOEQUANT_TOKENIZER_UNPACKED_DIR;
const fs::path texts_file = fs::path(MOEQUANT_TOKENIZER_EXPECTED_DIR) / "texts.json";

GgufFile file_with(std::vector<GgufKeyValue> metadata) {
    GgufFile f;
    f.metadata = std::move(metadata);
    return f;
}

void check_rebuilt(const std::string& name, const std::string& pre) {
    const fs::path dir = unpacked_dir / name;
    const GgufFile gguf = file_with(gguf_bpe_vocab(dir, {.pre = pre}));
    const GgufSourceTokenizer rebuilt = formats::gguf_source_tokenizer(gguf, name + ".gguf");
    BOOST_TEST_REQUIRE(rebuilt.missing.empty(), rebuilt.missing);
    const Tokenizer from_gguf = Tokenizer::parse(rebuilt.tokenizer_json, rebuilt.tokenizer_config_json, name + " rebuilt");
    // llama.cpp normalizes nothing: the original is compared without its normalizer (Qwen's NFC,
    // which changes only the decomposed text; DeepSeek's tokenizer.json has none).
    boost::json::value original_json = boost::json::parse(read_text(dir / "tokenizer.json"));
    original_json.as_object()["normalizer"] = nullptr;
    const Tokenizer original = Tokenizer::parse(boost::json::serialize(original_json), read_text(dir / "tokenizer_config.json"), name);
    std::size_t texts = 0;
    const boost::json::value all_texts = boost::json::parse(read_text(texts_file));
    for (const auto& t : all_texts.as_array()) {
        const std::string text(t.as_string());
        BOOST_TEST_CONTEXT(name << ": \"" << text << "\"") {
            for (bool special : {false, true}) {
                const std::vector<std::int32_t> got = from_gguf.encode(text, special), want = original.encode(text, special);
                BOOST_TEST(got == want, boost::test_tools::per_element());
            }
        }
        ++texts;
    }
    BOOST_TEST(texts >= 20u);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_source_tokenizer)

BOOST_AUTO_TEST_CASE(qwen3_rebuilt_from_its_gguf_keys_tokenizes_as_its_tokenizer_json) { check_rebuilt("qwen3", "qwen2"); }

BOOST_AUTO_TEST_CASE(deepseek_v3_rebuilt_from_its_gguf_keys_tokenizes_as_its_tokenizer_json) { check_rebuilt("deepseek_v3", "deepseek-v3"); }

BOOST_AUTO_TEST_CASE(what_is_not_rebuilt_says_why) {
    const GgufFile llama = file_with({{"tokenizer.ggml.model", GgufValue::string("llama")}});
    BOOST_TEST(formats::gguf_source_tokenizer(llama, "m.gguf").missing.find("'llama'") != std::string::npos);
    const GgufFile kimi = file_with({{"tokenizer.ggml.model", GgufValue::string("gpt2")}, {"tokenizer.ggml.pre", GgufValue::string("kimi-k2")}});
    BOOST_TEST(formats::gguf_source_tokenizer(kimi, "m.gguf").missing.find("'kimi-k2'") != std::string::npos);
    // A broken vocabulary is an input error naming the file.
    const GgufFile broken = file_with({{"tokenizer.ggml.model", GgufValue::string("gpt2")},
                                       {"tokenizer.ggml.pre", GgufValue::string("qwen2")},
                                       {"tokenizer.ggml.tokens", GgufValue::strings({"a", "b"})},
                                       {"tokenizer.ggml.merges", GgufValue::strings({"a b"})},
                                       {"tokenizer.ggml.token_type", GgufValue::i32s({1})}});
    try {
        formats::gguf_source_tokenizer(broken, "m.gguf");
        BOOST_ERROR("a token_type list of the wrong length was taken");
    } catch (const Error& e) {
        BOOST_TEST(e.code() == "BadGgufKey");
        BOOST_TEST(std::string(e.what()).find("m.gguf") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_SUITE_END()
