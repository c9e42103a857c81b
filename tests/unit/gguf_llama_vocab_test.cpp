// llama.cpp's "llama" vocabulary (formats/gguf/gguf_llama_vocab) as convert_hf_to_gguf.py's
// LlamaModel writes it for Mixtral: from tokenizer.json (gguf-py's LlamaHfVocab) on the real
// Mistral/Llama-2 tokenizer, and from tokenizer.model (SentencePiece): a real one made by
// sentencepiece's trainer (tests/data/tokenizers/spm_bpe_tiny) read piece for piece as
// sentencepiece reads it, one this test encodes by hand, and hostile ones refused naming the file.
#include "gguf_metadata_lookup.hpp"
#include "gguf_spm_model.hpp"
#include "gguf_vocab.hpp"

#include "test_support.hpp"

#include <moequant/error.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using namespace moequant;
using namespace moequant::formats;
using namespace moequant::test;

namespace {

const fs::path unpacked_dir = MOEQUANT_TOKENIZER_UNPACKED_DIR;
const fs::path tokenizer_data_dir = MOEQUANT_TOKENIZER_EXPECTED_DIR;

template <class T>
std::vector<T> array_at(const std::vector<GgufKeyValue>& kvs, std::string_view key, GgufType element) {
    const GgufValue* v = find(kvs, key);
    BOOST_TEST_REQUIRE(v != nullptr, key);
    BOOST_TEST_REQUIRE((v->type == GgufType::array && v->element == element));
    std::vector<T> out(v->count);
    BOOST_TEST_REQUIRE(v->bytes.size() == out.size() * sizeof(T));
    std::memcpy(out.data(), v->bytes.data(), v->bytes.size());
    return out;
}

// Protobuf's encoding, for writing tokenizer.model files.
std::string varint(std::uint64_t v) {
    std::string out;
    for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7F) | 0x80);
    return out + static_cast<char>(v);
}
std::string bytes_field(int field, const std::string& data) { return varint(static_cast<std::uint64_t>(field) << 3 | 2) + varint(data.size()) + data; }
std::string piece(const std::string& text, float score, int type) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &score, 4);
    std::string s = bytes_field(1, text) + varint(2 << 3 | 5);
    for (int i = 0; i < 4; ++i) s += static_cast<char>(bits >> (8 * i) & 0xFF);
    if (type != 1) s += varint(3 << 3 | 0) + varint(static_cast<std::uint64_t>(type));  // NORMAL is the default, left out
    return bytes_field(1, s);
}

// A SentencePiece model: pieces of each type, and a trainer_spec (field 2) to skip.
std::string small_spm_model() {
    return piece("<unk>", 0.0f, 2) + piece("<s>", 0.0f, 3) + piece("</s>", 0.0f, 3) + piece("<0x0A>", 0.0f, 6) +
           bytes_field(2, bytes_field(1, "trainer input") + varint(3 << 3) + varint(300)) + piece("\xE2\x96\x81the", -1.5f, 1) +
           piece("<user>", 0.0f, 4) + piece("<gone>", -3.0f, 5) + piece("a", -2.25f, 1);
}

std::vector<GgufKeyValue> llama_vocab(const fs::path& dir, std::int64_t vocab_size = 0) {
    return gguf_llama_vocab(dir, {.pre = "default", .vocab_size = vocab_size});
}

// Error(input) with `code`, naming `file`, from `call`.
template <class F>
void check_refusal(F call, const std::string& file, const std::string& code) {
    BOOST_CHECK_EXCEPTION(call(), Error, [&](const Error& e) {
        BOOST_TEST_MESSAGE(e.what());
        return e.kind() == ErrorKind::input && e.code() == code && contains(e.context().file, file);
    });
}

const std::string llama_tokenizer_json =
    R"({"added_tokens":[{"id":0,"content":"<unk>","special":true},{"id":1,"content":"<s>","special":true},)"
    R"({"id":2,"content":"</s>","special":true}],"decoder":{"type":"Sequence","decoders":[]},)"
    R"("model":{"type":"BPE","byte_fallback":true,"vocab":{"<unk>":0,"<s>":1,"</s>":2,"<0x41>":3,"\u2581a":4},"merges":[]}})";

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_llama_vocab)

// Mistral's 32000-token vocabulary (Mixtral's) without tokenizer.model: _set_vocab_llama_hf.
BOOST_AUTO_TEST_CASE(llama2_tokenizer_json_is_the_llama_hf_vocabulary) {
    const auto kvs = llama_vocab(unpacked_dir / "llama2", 32000);
    BOOST_TEST(keys_of(kvs) == (std::vector<std::string>{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                                         "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                                                         "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                                         "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token",
                                                         "tokenizer.ggml.add_eos_token"}),
               boost::test_tools::per_element());
    BOOST_TEST(find(kvs, "tokenizer.ggml.model")->as_string().value() == "llama");
    BOOST_TEST(find(kvs, "tokenizer.ggml.pre")->as_string().value() == "default");
    const auto tokens = find(kvs, "tokenizer.ggml.tokens")->as_strings().value();
    const auto scores = array_at<float>(kvs, "tokenizer.ggml.scores", GgufType::f32);
    const auto types = array_at<std::int32_t>(kvs, "tokenizer.ggml.token_type", GgufType::i32);
    BOOST_TEST_REQUIRE(tokens.size() == 32000u);
    BOOST_TEST(std::all_of(scores.begin(), scores.end(), [](float s) { return s == -1000.0f; }));  // LlamaHfVocab's placeholder
    BOOST_TEST(tokens[0] == "<unk>");
    BOOST_TEST(types[0] == 3);  // CONTROL: a special token (not UNKNOWN, as sentencepiece would say)
    BOOST_TEST(types[1] == 3);
    BOOST_TEST(types[2] == 3);
    BOOST_TEST(tokens[13] == "<0x0A>");
    BOOST_TEST(std::count(types.begin(), types.end(), 6) == 256);  // BYTE: <0x00>..<0xFF>
    BOOST_TEST(types[3] == 6);
    BOOST_TEST(types[258] == 6);
    BOOST_TEST(tokens[259] == "\xE2\x96\x81\xE2\x96\x81");  // ▁▁ as stored
    BOOST_TEST(types[259] == 1);
    BOOST_TEST(find(kvs, "tokenizer.ggml.bos_token_id")->as_unsigned().value() == 1u);
    BOOST_TEST(find(kvs, "tokenizer.ggml.eos_token_id")->as_unsigned().value() == 2u);
    BOOST_TEST(find(kvs, "tokenizer.ggml.unknown_token_id")->as_unsigned().value() == 0u);
    BOOST_TEST(find(kvs, "tokenizer.ggml.add_bos_token")->as_bool().value() == true);
    BOOST_TEST(find(kvs, "tokenizer.ggml.add_eos_token")->as_bool().value() == false);

    // config.json's vocab_size must be the tokenizer's: the converter does not pad this path.
    check_refusal([&] { llama_vocab(unpacked_dir / "llama2", 32064); }, "config.json", "VocabSizeMismatch");
}

// sentencepiece 0.1.97's own reading of a model its trainer made: every piece, score and kind.
BOOST_AUTO_TEST_CASE(a_sentencepiece_trained_model_reads_as_sentencepiece_reads_it) {
    const fs::path dir = tokenizer_data_dir / "spm_bpe_tiny";
    const auto pieces = read_spm_model(dir / "tokenizer.model", 1000);
    const boost::json::value expected = boost::json::parse(read_text(dir / "expected.json"));
    const auto& rows = expected.at("pieces").as_array();
    BOOST_TEST_REQUIRE(pieces.size() == rows.size());
    std::size_t same = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const auto& row = rows[i].as_array();
        const std::string kind(row[2].as_string());
        const SpmPieceType t = pieces[i].type;
        const std::string ours = t == SpmPieceType::unknown ? "unknown" : t == SpmPieceType::control ? "control" : t == SpmPieceType::unused ? "unused"
                               : t == SpmPieceType::byte    ? "byte"    : "normal";
        same += pieces[i].piece == std::string(row[0].as_string()) && pieces[i].score == static_cast<float>(row[1].to_number<double>()) &&
                ours == kind;
    }
    BOOST_TEST(same == pieces.size());
    BOOST_TEST((pieces[5].piece == "<user>" && pieces[5].type == SpmPieceType::user_defined));

    // As a model folder's vocabulary: the pieces as they are, none padded, <user> NORMAL.
    TempDir folder;
    fs::copy_file(dir / "tokenizer.model", folder / "tokenizer.model");
    const auto kvs = llama_vocab(folder.path(), 512);
    const auto tokens = find(kvs, "tokenizer.ggml.tokens")->as_strings().value();
    const auto types = array_at<std::int32_t>(kvs, "tokenizer.ggml.token_type", GgufType::i32);
    BOOST_TEST(tokens.size() == 512u);
    BOOST_TEST(types[0] == 2);  // UNKNOWN
    BOOST_TEST(types[3] == 3);  // [INST]: CONTROL
    BOOST_TEST(types[5] == 1);  // <user>
    BOOST_TEST(std::count(types.begin(), types.end(), 6) == 256);
}

// Added tokens past model.vocab follow it in id order: CONTROL when named special, else
// USER_DEFINED (▁ kept); special_tokens_map.json names special tokens too.
BOOST_AUTO_TEST_CASE(llama_hf_added_tokens_and_named_specials) {
    TempDir dir;
    std::string json = llama_tokenizer_json;
    json.replace(json.find(R"({"id":2,)"), 0, R"({"id":5,"content":"[INST]","special":true},{"id":6,"content":"\u2581x","special":false},)");
    write_text(dir / "tokenizer.json", json);
    write_text(dir / "special_tokens_map.json", R"({"additional_special_tokens":["[INST]"],"pad_token":"<0x41>"})");
    const auto kvs = llama_vocab(dir.path(), 7);
    const auto tokens = find(kvs, "tokenizer.ggml.tokens")->as_strings().value();
    const auto types = array_at<std::int32_t>(kvs, "tokenizer.ggml.token_type", GgufType::i32);
    BOOST_TEST(tokens == (std::vector<std::string>{"<unk>", "<s>", "</s>", "<0x41>", "\xE2\x96\x81" "a", "[INST]", "\xE2\x96\x81x"}),
               boost::test_tools::per_element());
    BOOST_TEST(types == (std::vector<std::int32_t>{3, 3, 3, 6, 1, 3, 4}), boost::test_tools::per_element());  // BYTE before CONTROL
    BOOST_TEST(!find(kvs, "tokenizer.ggml.scores")->bytes.empty());

    // A gap in the added ids would renumber every later token in llama.cpp.
    fs::remove(dir / "special_tokens_map.json");
    json = llama_tokenizer_json;
    json.replace(json.find(R"({"id":2,)"), 0, R"({"id":9,"content":"[X]","special":true},)");
    write_text(dir / "tokenizer.json", json);
    check_refusal([&] { llama_vocab(dir.path()); }, "tokenizer.json", "TokenIdOutOfRange");
    // An added token over model.vocab with another text.
    json = llama_tokenizer_json;
    json.replace(json.find(R"({"id":2,)"), 0, R"({"id":4,"content":"[X]","special":true},)");
    write_text(dir / "tokenizer.json", json);
    check_refusal([&] { llama_vocab(dir.path()); }, "tokenizer.json", "DuplicateTokenId");
    // A special token that is not in the vocabulary.
    write_text(dir / "tokenizer.json", llama_tokenizer_json);
    write_text(dir / "tokenizer_config.json", R"({"eos_token":"<|end|>"})");
    check_refusal([&] { llama_vocab(dir.path()); }, "tokenizer.json", "MissingSpecialToken");
    // Not a byte-fallback BPE, and no tokenizer.model: the converter would go to its gpt2 path.
    json = llama_tokenizer_json;
    json.replace(json.find(R"("byte_fallback":true)"), 20, R"("byte_fallback":false)");
    write_text(dir / "tokenizer.json", json);
    fs::remove(dir / "tokenizer_config.json");
    check_refusal([&] { llama_vocab(dir.path()); }, "tokenizer.json", "NotLlamaVocab");
}

// With tokenizer.model the SentencePiece path wins over tokenizer.json: pieces, scores and types as
// sentencepiece gives them (USER_DEFINED counts as NORMAL), padded to vocab_size with [PADi] at
// -10000, then added_tokens.json (USER_DEFINED) and added_tokens_decoder (CONTROL when special or
// looking special, else USER_DEFINED with ▁ as a space), each at -1000.
BOOST_AUTO_TEST_CASE(tokenizer_model_is_read_as_sentencepiece_does) {
    TempDir dir;
    write_text(dir / "tokenizer.model", small_spm_model());
    write_text(dir / "tokenizer.json", llama_tokenizer_json);
    write_text(dir / "added_tokens.json", R"({"<extra>": 9, "<past>": 40})");
    write_text(dir / "tokenizer_config.json",
               R"({"add_bos_token":true,"add_eos_token":false,"add_prefix_space":false,"bos_token":"<s>","eos_token":"</s>",)"
               R"("added_tokens_decoder":{"0":{"content":"<unk>","special":true},"10":{"content":"\u2581tool","special":false},)"
               R"("11":{"content":"<|im_end|>","special":false}},"chat_template":"{{ bos_token }}"})");
    const auto kvs = llama_vocab(dir.path(), 12);
    const auto tokens = find(kvs, "tokenizer.ggml.tokens")->as_strings().value();
    const auto scores = array_at<float>(kvs, "tokenizer.ggml.scores", GgufType::f32);
    const auto types = array_at<std::int32_t>(kvs, "tokenizer.ggml.token_type", GgufType::i32);
    BOOST_TEST(tokens == (std::vector<std::string>{"<unk>", "<s>", "</s>", "<0x0A>", "\xE2\x96\x81the", "<user>", "<gone>", "a",
                                                   "[PAD8]", "<extra>", " tool", "<|im_end|>"}),
               boost::test_tools::per_element());
    BOOST_TEST(scores == (std::vector<float>{-1000, 0, 0, 0, -1.5f, 0, -3, -2.25f, -10000, -1000, -1000, -1000}),
               boost::test_tools::per_element());
    BOOST_TEST(types == (std::vector<std::int32_t>{3, 3, 3, 6, 1, 1, 5, 1, 5, 4, 4, 3}), boost::test_tools::per_element());
    BOOST_TEST(find(kvs, "tokenizer.ggml.model")->as_string().value() == "llama");
    // Special ids through tokenizer.json's added tokens; the template and add_space_prefix last.
    BOOST_TEST(find(kvs, "tokenizer.ggml.bos_token_id")->as_unsigned().value() == 1u);
    BOOST_TEST(find(kvs, "tokenizer.ggml.eos_token_id")->as_unsigned().value() == 2u);
    BOOST_TEST(find(kvs, "tokenizer.chat_template")->as_string().value() == "{{ bos_token }}");
    BOOST_TEST(keys_of(kvs).back() == "tokenizer.ggml.add_space_prefix");
    BOOST_TEST(find(kvs, "tokenizer.ggml.add_space_prefix")->as_bool().value() == false);

    // Without config.json's vocab_size the model's own count; fewer slots than pieces is refused.
    fs::remove(dir / "added_tokens.json");
    fs::remove(dir / "tokenizer_config.json");
    BOOST_TEST(find(llama_vocab(dir.path()), "tokenizer.ggml.tokens")->as_strings().value().size() == 8u);
    check_refusal([&] { llama_vocab(dir.path(), 5); }, "config.json", "TokenIdOutOfRange");
}

// Every length is checked before it is used: truncated or malformed models are refused naming the file.
BOOST_AUTO_TEST_CASE(hostile_tokenizer_models_are_refused) {
    const std::string good = small_spm_model();
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"truncated", good.substr(0, good.size() - 3)},
        {"a length past the end", bytes_field(1, "") .substr(0, 1) + varint(1ull << 40)},
        {"an endless varint", std::string(11, '\xFF')},
        {"a group wire type", varint(1 << 3 | 3)},
        {"an empty piece", piece("", 0, 1)},
        {"a repeated piece", piece("a", 0, 1) + piece("a", -1, 1)},
        {"an unknown type", piece("a", 0, 9)},
        {"invalid UTF-8", piece("\xC3", 0, 1)},
        {"no pieces", bytes_field(2, "spec")},
    };
    for (const auto& entry : bad) {  // no structured binding: clang 14 cannot capture one
        const std::string& bytes = entry.second;
        BOOST_TEST_CONTEXT(entry.first) {
            check_refusal([&] { parse_spm_model(bytes, "dir/tokenizer.model", 1000); }, "tokenizer.model", "BadSentencePieceModel");
        }
    }
    check_refusal([&] { parse_spm_model(good, "dir/tokenizer.model", 3); }, "tokenizer.model", "BadSentencePieceModel");
    BOOST_TEST(parse_spm_model(good, "dir/tokenizer.model", 8).size() == 8u);
}

BOOST_AUTO_TEST_SUITE_END()
