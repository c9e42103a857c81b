// The tokenizer a GGUF read as a checkpoint gets (formats/gguf/gguf_source_tokenizer): the real
// Qwen3 and DeepSeek-V3 tokenizers (unpacked into the build tree from tests/data/tokenizers) written
// as llama.cpp's converter writes them (gguf_bpe_vocab, pre-tokenizers qwen2 and deepseek-v3), then
// rebuilt from those keys alone, tokenize every text of tests/data/tokenizers/texts.json — English,
// digits, whitespace runs, CJK, Cyrillic, Arabic, emoji — to the ids of the original tokenizer.json,
// with and without the special tokens; a SentencePiece vocabulary gives llama.cpp's own ids. What
// is not rebuilt says why.
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

// A SentencePiece vocabulary (Mixtral's kind): the 512-piece spm_bpe_tiny model written as the
// converter writes a llama vocabulary from tokenizer.model, rebuilt from those keys alone, gives
// llama.cpp's own ids (llama-tokenize on such a GGUF, llama_cpp_ids.json) for every text, with the
// BOS llama.cpp adds and without.
BOOST_AUTO_TEST_CASE(a_sentencepiece_vocabulary_tokenizes_as_llama_cpp_does) {
    const fs::path spm = fs::path(MOEQUANT_TOKENIZER_EXPECTED_DIR) / "spm_bpe_tiny";
    TempDir dir;
    fs::copy_file(spm / "tokenizer.model", dir / "tokenizer.model");
    // The synthesized Mixtral's side files, which make_llama_cpp_ids.py converted with it.
    write_text(dir / "tokenizer_config.json",
               R"({"add_bos_token": true, "add_eos_token": false, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})");
    write_text(dir / "config.json", R"({"model_type": "mixtral", "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2})");
    const GgufFile gguf = file_with(gguf_llama_vocab(dir.path(), {.pre = "default", .vocab_size = 512}));
    const GgufSourceTokenizer rebuilt = formats::gguf_source_tokenizer(gguf, "spm.gguf");
    BOOST_TEST_REQUIRE(rebuilt.missing.empty(), rebuilt.missing);
    const Tokenizer tokenizer = Tokenizer::parse(rebuilt.tokenizer_json, rebuilt.tokenizer_config_json, "spm rebuilt");
    const boost::json::value expected = boost::json::parse(read_text(spm / "llama_cpp_ids.json"));
    std::size_t cases = 0;
    auto ids_of = [](const boost::json::value& list) {
        std::vector<std::int32_t> ids;
        for (const auto& v : list.as_array()) ids.push_back(static_cast<std::int32_t>(v.to_number<std::int64_t>()));
        return ids;
    };
    for (const auto& c : expected.at("cases").as_array()) {
        const std::string text(c.at("text").as_string());
        BOOST_TEST_CONTEXT("\"" << text << "\"") {
            const std::vector<std::int32_t> plain = tokenizer.encode(text), with_bos = tokenizer.encode(text, true);
            BOOST_TEST(plain == ids_of(c.at("ids")), boost::test_tools::per_element());
            BOOST_TEST(with_bos == ids_of(c.at("ids_with_bos")), boost::test_tools::per_element());
        }
        ++cases;
    }
    BOOST_TEST(cases >= 20u);
}

BOOST_AUTO_TEST_CASE(what_is_not_rebuilt_says_why) {
    const GgufFile ugm = file_with({{"tokenizer.ggml.model", GgufValue::string("t5")}});
    BOOST_TEST(formats::gguf_source_tokenizer(ugm, "m.gguf").missing.find("'t5'") != std::string::npos);
    // Every piece scoring the same (LlamaHfVocab): no merge order in the file.
    const GgufFile unranked = file_with({{"tokenizer.ggml.model", GgufValue::string("llama")},
                                         {"tokenizer.ggml.tokens", GgufValue::strings({"a", "b", "ab"})},
                                         {"tokenizer.ggml.scores", GgufValue::f32s({-1000, -1000, -1000})},
                                         {"tokenizer.ggml.token_type", GgufValue::i32s({1, 1, 1})}});
    BOOST_TEST(formats::gguf_source_tokenizer(unranked, "m.gguf").missing.find("no merge order") != std::string::npos);
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
