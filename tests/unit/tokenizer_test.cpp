// Tokenizer against token ids made by the JavaScript port of the Hugging Face tokenizers
// (tests/data/tokenizers/make_expected.mjs, run once) on a multilingual sample, with the real
// tokenizer.json of each tokenizer type the families use: DeepSeek-V3 (byte-level BPE, digit
// and CJK splits), Qwen3 (byte-level BPE, NFC) and Llama-2 (SentencePiece-style BPE with byte
// fallback, as Mixtral's). The .json.gz files are unpacked into the build tree.
#include "test_support.hpp"

#include <moequant/engine/tokenizer.hpp>
#include <moequant/error.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

const fs::path expected_dir = MOEQUANT_TOKENIZER_EXPECTED_DIR;
const fs::path unpacked_dir = MOEQUANT_TOKENIZER_UNPACKED_DIR;

std::vector<std::int32_t> ids_of(const json::value& list) {
    std::vector<std::int32_t> ids;
    for (const auto& v : list.as_array()) ids.push_back(static_cast<std::int32_t>(v.to_number<std::int64_t>()));
    return ids;
}

// Every text of expected.json; `with_special` maps the plain ids to those with special tokens.
void check_family(const std::string& name, const std::function<std::vector<std::int32_t>(const json::object&)>& with_special) {
    const Tokenizer tokenizer = Tokenizer::load(unpacked_dir / name / "tokenizer.json");
    const json::value expected = json::parse(read_text(expected_dir / name / "expected.json"));
    std::size_t cases = 0;
    for (const auto& c : expected.at("cases").as_array()) {
        const std::string text(c.at("text").as_string());
        BOOST_TEST_CONTEXT(name << ": \"" << text << "\"") {
            BOOST_TEST(tokenizer.encode(text) == ids_of(c.at("ids")), boost::test_tools::per_element());
            BOOST_TEST(tokenizer.encode(text, true) == with_special(c.as_object()), boost::test_tools::per_element());
        }
        ++cases;
    }
    BOOST_TEST(cases == 20u);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tokenizer)

BOOST_AUTO_TEST_CASE(qwen3_byte_level_bpe_with_nfc_matches_the_reference) {
    check_family("qwen3", [](const json::object& c) { return ids_of(c.at("ids_with_special_tokens")); });
}

BOOST_AUTO_TEST_CASE(llama2_sentencepiece_bpe_with_byte_fallback_matches_the_reference) {
    check_family("llama2", [](const json::object& c) { return ids_of(c.at("ids_with_special_tokens")); });
}

// DeepSeek-V3's tokenizer_config.json says LlamaTokenizerFast with add_bos_token: transformers
// then puts BOS (id 0) first, where the JavaScript port keeps the file's ByteLevel
// post-processor and adds nothing; we follow transformers.
BOOST_AUTO_TEST_CASE(deepseek_v3_byte_level_bpe_with_digit_and_cjk_splits_matches_the_reference) {
    check_family("deepseek_v3", [](const json::object& c) {
        std::vector<std::int32_t> ids = {0};
        for (auto id : ids_of(c.at("ids"))) ids.push_back(id);
        return ids;
    });
}

BOOST_AUTO_TEST_CASE(vocabulary_and_special_tokens) {
    const Tokenizer qwen = Tokenizer::load(unpacked_dir / "qwen3" / "tokenizer.json");
    BOOST_TEST(qwen.token_id("<|im_start|>").value() == 151644);
    BOOST_TEST(qwen.token_id("Hello").value() == 9707);
    BOOST_TEST(!qwen.token_id("no such token"));
    BOOST_TEST(qwen.vocab_size() == 151669);
    const Tokenizer llama = Tokenizer::load(unpacked_dir / "llama2" / "tokenizer.json");
    BOOST_TEST(llama.vocab_size() == 32000);
    BOOST_TEST(llama.token_id("<0x0A>").value() == 13);
}

BOOST_AUTO_TEST_CASE(unsupported_files_and_bad_text_are_input_errors) {
    auto code_of = [](const std::function<void()>& f) {
        try {
            f();
        } catch (const Error& e) {
            BOOST_TEST((e.kind() == ErrorKind::input));
            return e.context().code;
        }
        return std::string("none");
    };
    const std::string wordpiece = R"({"model": {"type": "WordPiece", "vocab": {}}})";
    BOOST_TEST(code_of([&] { Tokenizer::parse(wordpiece, "", "t.json"); }) == "BadTokenizer");
    const std::string bad_regex =
        R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"},
            "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
    BOOST_TEST(code_of([&] { Tokenizer::parse(bad_regex, "", "t.json"); }) == "BadTokenizer");
    const std::string bad_merge = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})";
    BOOST_TEST(code_of([&] { Tokenizer::parse(bad_merge, "", "t.json"); }) == "BadTokenizer");
    BOOST_TEST(code_of([&] { Tokenizer::parse("{not json", "", "t.json"); }) == "BadTokenizer");
    const Tokenizer tiny = Tokenizer::parse(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})", "", "t.json");
    BOOST_TEST(code_of([&] { tiny.encode("a\xff"); }) == "BadText");
}

// Split behaviours, Metaspace, Digits and added-token stripping on a small hand-made file whose
// ids follow from the rules (model-families tokenizers do not use them all).
BOOST_AUTO_TEST_CASE(pre_tokenizer_behaviours_and_added_token_options) {
    const std::string file = R"({
      "added_tokens": [{"id": 9, "content": "<x>", "special": true, "lstrip": true, "rstrip": true,
                        "single_word": false, "normalized": false}],
      "normalizer": {"type": "Sequence", "normalizers": [{"type": "Lowercase"}]},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
          {"type": "Digits", "individual_digits": true},
          {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithPrevious"}]},
      "model": {"type": "BPE", "unk_token": "?", "fuse_unk": true,
                "vocab": {"a": 0, "b": 1, "ab": 2, "1": 3, "2": 4, "-": 5, "a-": 6, "?": 7, "b-": 8},
                "merges": ["a b", "a -", "b -"]}})";
    const Tokenizer t = Tokenizer::parse(file, "", "t.json");
    // "AB12" -> "ab12" -> ab | 1 | 2; "a-b" -> "a-" "b"; "zzz" -> one fused unknown;
    // " <x> " -> the token takes both spaces.
    BOOST_TEST(t.encode("AB12") == std::vector<std::int32_t>({2, 3, 4}), boost::test_tools::per_element());
    BOOST_TEST(t.encode("a-b") == std::vector<std::int32_t>({6, 1}), boost::test_tools::per_element());
    BOOST_TEST(t.encode("zzz") == std::vector<std::int32_t>({7}), boost::test_tools::per_element());
    BOOST_TEST(t.encode("ab <x> ab") == std::vector<std::int32_t>({2, 9, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
