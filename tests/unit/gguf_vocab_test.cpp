// GGUF tokenizer metadata (formats/gguf/gguf_vocab) as llama.cpp's convert_hf_to_gguf.py writes
// it for BPE tokenizers: the real Qwen3 and DeepSeek-V3 tokenizers (unpacked into the build tree
// from tests/data/tokenizers), small hand-written folders for each rule, and refusals naming the file.
#include "gguf_metadata_lookup.hpp"
#include "gguf_vocab.hpp"

#include "test_support.hpp"

#include <moequant/error.hpp>

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

std::uint64_t u32_at(const std::vector<GgufKeyValue>& kvs, std::string_view key) {
    const GgufValue* v = find(kvs, key);
    BOOST_TEST_REQUIRE(v != nullptr, key);
    BOOST_TEST_REQUIRE((v->type == GgufType::u32));
    return v->as_unsigned().value();
}

bool bool_at(const std::vector<GgufKeyValue>& kvs, std::string_view key) {
    const GgufValue* v = find(kvs, key);
    BOOST_TEST_REQUIRE(v != nullptr, key);
    return v->as_bool().value();
}

std::size_t index_of(const std::vector<std::string>& tokens, const std::string& token) {
    return static_cast<std::size_t>(std::find(tokens.begin(), tokens.end(), token) - tokens.begin());
}

// A model folder with tokenizer.json {model: <model>, added_tokens: <added>[, post_processor]}
// and the optional side files.
struct Folder {
    TempDir dir;
    explicit Folder(const std::string& model, const std::string& added = "[]", const std::string& extra = "") {
        write_text(dir / "tokenizer.json", R"({"version":"1.0","added_tokens":)" + added + R"(,"model":)" + model + extra + "}");
    }
    Folder& with(const std::string& name, const std::string& text) {
        write_text(dir / name, text);
        return *this;
    }
    std::vector<GgufKeyValue> vocab(std::int64_t vocab_size = 0) const {
        return gguf_bpe_vocab(dir.path(), {.pre = "test-pre", .vocab_size = vocab_size});
    }
};

const std::string small_model = R"({"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]})";

// Error(input) with `code`, naming `file`.
void check_refusal(const Folder& folder, const std::string& file, const std::string& code, std::int64_t vocab_size = 0) {
    BOOST_CHECK_EXCEPTION(folder.vocab(vocab_size), Error, [&](const Error& e) {
        BOOST_TEST_MESSAGE(e.what());
        return e.kind() == ErrorKind::input && e.code() == code && contains(e.context().file, file);
    });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_vocab)

BOOST_AUTO_TEST_CASE(qwen3_is_padded_typed_and_carries_its_specials_and_template) {
    const auto kvs = gguf_bpe_vocab(unpacked_dir / "qwen3", {.pre = "qwen2", .vocab_size = 151936});
    BOOST_TEST(keys_of(kvs) == (std::vector<std::string>{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                                         "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                                                         "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id",
                                                         "tokenizer.ggml.add_bos_token", "tokenizer.chat_template"}),
               boost::test_tools::per_element());
    BOOST_TEST(find(kvs, "tokenizer.ggml.model")->as_string().value() == "gpt2");
    BOOST_TEST(find(kvs, "tokenizer.ggml.pre")->as_string().value() == "qwen2");

    const auto tokens = strings_at(kvs, "tokenizer.ggml.tokens");
    const auto types = types_of(kvs);
    BOOST_TEST_REQUIRE(tokens.size() == 151936u);
    BOOST_TEST_REQUIRE(types.size() == 151936u);
    BOOST_TEST(tokens[0] == "!");
    BOOST_TEST(types[0] == 1);
    BOOST_TEST(tokens[151644] == "<|im_start|>");
    BOOST_TEST(types[151644] == 3);  // CONTROL
    BOOST_TEST(tokens[151667] == "<think>");
    BOOST_TEST(types[151667] == 4);  // USER_DEFINED: added, not special, does not look special
    BOOST_TEST(tokens[151669] == "[PAD151669]");
    BOOST_TEST(types[151669] == 5);  // UNUSED
    BOOST_TEST(tokens.back() == "[PAD151935]");
    BOOST_TEST(types.back() == 5);

    const auto merges = strings_at(kvs, "tokenizer.ggml.merges");
    BOOST_TEST(merges.size() == 151387u);
    BOOST_TEST(merges.front() == "\xC4\xA0 \xC4\xA0");  // ["Ġ", "Ġ"]

    // tokenizer_config: eos_token <|im_end|>, pad_token <|endoftext|>, bos_token null.
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.eos_token_id") == index_of(tokens, "<|im_end|>"));
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.padding_token_id") == index_of(tokens, "<|endoftext|>"));
    BOOST_TEST(bool_at(kvs, "tokenizer.ggml.add_bos_token") == false);
    BOOST_TEST(contains(find(kvs, "tokenizer.chat_template")->as_string().value(), "<|im_start|>"));
}

// With Qwen3's config.json, bos comes from its bos_token_id after the ids tokenizer_config gave:
// the converter's keys follow the order it found the ids in (Qwen3 GGUFs list eos, padding, bos).
BOOST_AUTO_TEST_CASE(qwen3_config_json_ids_follow_the_tokenizer_config_ones) {
    TempDir dir;
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(unpacked_dir / "qwen3" / name, dir / name);
    write_text(dir / "config.json", R"({"bos_token_id":151643,"eos_token_id":151645,"vocab_size":151936})");
    const auto kvs = gguf_bpe_vocab(dir.path(), {.pre = "qwen2", .vocab_size = 151936});
    const auto keys = keys_of(kvs);
    BOOST_TEST(std::vector<std::string>(keys.begin() + 5, keys.end()) ==
                   (std::vector<std::string>{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id",
                                             "tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.chat_template"}),
               boost::test_tools::per_element());
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.bos_token_id") == 151643u);
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.eos_token_id") == 151645u);
}

BOOST_AUTO_TEST_CASE(deepseek_v3_added_tokens_over_the_vocab_and_bos) {
    const auto kvs = gguf_bpe_vocab(unpacked_dir / "deepseek_v3", {.pre = "deepseek-v3", .vocab_size = 129280});
    const auto tokens = strings_at(kvs, "tokenizer.ggml.tokens");
    const auto types = types_of(kvs);
    BOOST_TEST_REQUIRE(tokens.size() == 129280u);
    // <｜begin▁of▁sentence｜> is both in model.vocab and added_tokens at id 0: one token, CONTROL.
    BOOST_TEST(tokens[0] == "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
    BOOST_TEST(types[0] == 3);
    // <｜User｜> is added with special false but looks special.
    BOOST_TEST(tokens[128803] == "<\xEF\xBD\x9CUser\xEF\xBD\x9C>");
    BOOST_TEST(types[128803] == 3);
    BOOST_TEST(tokens[128815] == "[PAD128815]");
    BOOST_TEST(types[128815] == 5);
    BOOST_TEST(strings_at(kvs, "tokenizer.ggml.merges").front() == "\xC4\xA0 t");
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.bos_token_id") == 0u);
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.eos_token_id") == 1u);
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.padding_token_id") == 1u);
    BOOST_TEST(bool_at(kvs, "tokenizer.ggml.add_bos_token") == true);
    BOOST_TEST(bool_at(kvs, "tokenizer.ggml.add_eos_token") == false);
    BOOST_TEST(find(kvs, "tokenizer.chat_template") != nullptr);
}

BOOST_AUTO_TEST_CASE(list_merges_encode_spaces_inside_a_part) {
    const Folder folder(R"({"type":"BPE","vocab":{"a":0,"b c":1},"merges":[["a","b c"],[" x","y"]]})");
    const auto kvs = folder.vocab();
    BOOST_TEST(strings_at(kvs, "tokenizer.ggml.merges") ==
                   (std::vector<std::string>{"a b\xC4\xA0" "c", "\xC4\xA0x y"}),
               boost::test_tools::per_element());
    BOOST_TEST(strings_at(kvs, "tokenizer.ggml.tokens") == (std::vector<std::string>{"a", "b c"}), boost::test_tools::per_element());
    // No tokenizer_config: no flags, ids or template.
    BOOST_TEST(keys_of(kvs).size() == 5u);
}

BOOST_AUTO_TEST_CASE(a_missing_id_is_an_unused_pad_token_and_no_merges_no_key) {
    const Folder folder(R"({"type":"BPE","vocab":{"a":0,"c":2}})");
    const auto kvs = folder.vocab(4);
    BOOST_TEST(strings_at(kvs, "tokenizer.ggml.tokens") == (std::vector<std::string>{"a", "[PAD1]", "c", "[PAD3]"}),
               boost::test_tools::per_element());
    BOOST_TEST(types_of(kvs) == (std::vector<std::int32_t>{1, 5, 1, 5}), boost::test_tools::per_element());
    BOOST_TEST(find(kvs, "tokenizer.ggml.merges") == nullptr);
}

BOOST_AUTO_TEST_CASE(added_tokens_are_control_or_user_defined) {
    Folder folder(small_model, R"([
        {"id":3,"content":"\u2581hello\u2581world","special":false,"normalized":false},
        {"id":4,"content":"<|tool|>","special":false},
        {"id":5,"content":"<mine>","special":true},
        {"id":6,"content":"<unused7>","special":false},
        {"id":7,"content":"<pad>","special":false},
        {"id":8,"content":"<marked>","special":false}])");
    folder.with("tokenizer_config.json", R"({"added_tokens_decoder":{"8":{"content":"<marked>","special":true}}})");
    const auto kvs = folder.vocab();
    const auto tokens = strings_at(kvs, "tokenizer.ggml.tokens");
    BOOST_TEST(tokens[3] == " hello world");
    BOOST_TEST(types_of(kvs) == (std::vector<std::int32_t>{1, 1, 1, 4, 3, 3, 3, 3, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(special_ids_from_tokenizer_config_then_config_json) {
    Folder folder(small_model, R"([{"id":3,"content":"<s>","special":true},{"id":4,"content":"</s>","special":true}])");
    // tokenizer_config names eos as an AddedToken object; bos falls to config.json, whose list
    // eos_token_id is ignored anyway; unk_token_id comes from text_config.
    folder.with("tokenizer_config.json", R"({"eos_token":{"content":"</s>"},"add_eos_token":true})")
        .with("config.json", R"({"bos_token_id":3,"eos_token_id":[4,3],"pad_token_id":null,
                                 "text_config":{"unk_token_id":0,"pad_token_id":99}})");
    const auto kvs = folder.vocab();
    BOOST_TEST(keys_of(kvs) == (std::vector<std::string>{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                                         "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                                                         "tokenizer.ggml.eos_token_id", "tokenizer.ggml.bos_token_id",
                                                         "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_eos_token"}),
               boost::test_tools::per_element());
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.eos_token_id") == 4u);
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.bos_token_id") == 3u);
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.unknown_token_id") == 0u);
    BOOST_TEST(bool_at(kvs, "tokenizer.ggml.add_eos_token") == true);
}

// A family's specials by their text (GLM's _set_vocab_glm): set after the files, only where the
// files named none of that type, only when the added token exists; eot/eom get their own keys.
BOOST_AUTO_TEST_CASE(named_specials_fill_only_the_types_the_files_left_unset) {
    Folder folder(small_model, R"([{"id":3,"content":"[gMASK]","special":true},{"id":4,"content":"<|user|>","special":true},
                                   {"id":5,"content":"<|endoftext|>","special":true}])");
    folder.with("tokenizer_config.json", R"({"eos_token":"<|endoftext|>","unk_token":"<|endoftext|>"})");
    const auto kvs = gguf_bpe_vocab(folder.dir.path(), {.pre = "glm4",
                                                        .named_specials = {{"bos", "[gMASK]"},
                                                                           {"eot", "<|user|>"},
                                                                           {"unk", "[gMASK]"},  // the file's unk stays
                                                                           {"eom", "<|observation|>"}}});  // absent: left out
    BOOST_TEST(keys_of(kvs) == (std::vector<std::string>{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                                         "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                                                         "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                                                         "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eot_token_id"}),
               boost::test_tools::per_element());
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.bos_token_id") == 3u);
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.eot_token_id") == 4u);
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.unknown_token_id") == 5u);
}

BOOST_AUTO_TEST_CASE(a_list_eos_token_id_alone_gives_no_eos) {
    Folder folder(small_model);
    folder.with("config.json", R"({"eos_token_id":[1,2]})");
    BOOST_TEST(find(folder.vocab(), "tokenizer.ggml.eos_token_id") == nullptr);
}

BOOST_AUTO_TEST_CASE(add_bos_is_inferred_from_a_template_post_processor) {
    const std::string added = R"([{"id":3,"content":"<s>","special":true}])";
    const std::string post = R"(,"post_processor":{"type":"TemplateProcessing",
        "single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}]})";
    Folder folder(small_model, added, post);
    folder.with("tokenizer_config.json", R"({"bos_token":"<s>","chat_template":[{"name":"tool_use","template":"T"},
                                                                                 {"name":"default","template":"D"}]})");
    const auto kvs = folder.vocab();
    BOOST_TEST(bool_at(kvs, "tokenizer.ggml.add_bos_token") == true);
    BOOST_TEST(find(kvs, "tokenizer.ggml.add_eos_token") == nullptr);
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.bos_token_id") == 3u);
    BOOST_TEST(find(kvs, "tokenizer.chat_template")->as_string().value() == "D");

    // tokenizer_config's own flag wins; a Sequence of processors is read too.
    Folder sequence(small_model, added, R"(,"post_processor":{"type":"Sequence","processors":[{"type":"ByteLevel"},
        {"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}]}]})");
    sequence.with("tokenizer_config.json", R"({"bos_token":"<s>","add_bos_token":false})");
    BOOST_TEST(bool_at(sequence.vocab(), "tokenizer.ggml.add_bos_token") == false);
}

// A trailing special token becomes the EOS (add_eos true) even where tokenizer_config named
// another; RobertaProcessing adds both.
BOOST_AUTO_TEST_CASE(add_eos_and_the_eos_from_a_trailing_template_token) {
    const std::string added = R"([{"id":3,"content":"</s>","special":true},{"id":4,"content":"<|end|>","special":true}])";
    Folder trailing(small_model, added, R"(,"post_processor":{"type":"TemplateProcessing",
        "single":[{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"</s>","type_id":0}}]})");
    trailing.with("tokenizer_config.json", R"({"eos_token":"<|end|>"})");
    auto kvs = trailing.vocab();
    BOOST_TEST(bool_at(kvs, "tokenizer.ggml.add_eos_token") == true);
    BOOST_TEST(find(kvs, "tokenizer.ggml.add_bos_token") == nullptr);
    BOOST_TEST(u32_at(kvs, "tokenizer.ggml.eos_token_id") == 3u);

    Folder roberta(small_model, added, R"(,"post_processor":{"type":"RobertaProcessing","sep":["</s>",3],"cls":["<s>",0]})");
    kvs = roberta.vocab();
    BOOST_TEST(bool_at(kvs, "tokenizer.ggml.add_bos_token") == true);
    BOOST_TEST(bool_at(kvs, "tokenizer.ggml.add_eos_token") == true);
}

BOOST_AUTO_TEST_CASE(the_chat_template_file_when_tokenizer_config_has_none) {
    Folder folder(small_model);
    folder.with("tokenizer_config.json", R"({"add_bos_token":false})").with("chat_template.jinja", "{{ messages }}");
    BOOST_TEST(find(folder.vocab(), "tokenizer.chat_template")->as_string().value() == "{{ messages }}");
}

BOOST_AUTO_TEST_CASE(refuses_what_is_not_a_bpe_vocabulary) {
    check_refusal(Folder(R"({"type":"WordPiece","vocab":{"a":0}})"), "tokenizer.json", "NotBpe");
    check_refusal(Folder(R"({"type":"Unigram","vocab":[["a",0.0]]})"), "tokenizer.json", "NotBpe");
    // An id at or past vocab_size, negative, or not an integer.
    check_refusal(Folder(small_model), "tokenizer.json", "TokenIdOutOfRange", 2);
    check_refusal(Folder(small_model, R"([{"id":7,"content":"<x>","special":true}])"), "tokenizer.json", "TokenIdOutOfRange", 5);
    check_refusal(Folder(R"({"type":"BPE","vocab":{"a":-1}})"), "tokenizer.json", "TokenIdOutOfRange");
    check_refusal(Folder(R"({"type":"BPE","vocab":{"a":1.5}})"), "tokenizer.json", "BadTokenId");
    check_refusal(Folder(R"({"type":"BPE","vocab":{"a":99999999999}})"), "tokenizer.json", "TokenIdOutOfRange");
    // Two texts for one id, in model.vocab or between it and added_tokens.
    check_refusal(Folder(R"({"type":"BPE","vocab":{"a":0,"b":0}})"), "tokenizer.json", "DuplicateTokenId");
    check_refusal(Folder(small_model, R"([{"id":1,"content":"<x>","special":true}])"), "tokenizer.json", "DuplicateTokenId");
    check_refusal(Folder(R"({"type":"BPE","vocab":{"a":0},"merges":["a b",["a","b"]]})"), "tokenizer.json", "BadMerges");
    check_refusal(Folder(small_model), "config.json", "BadVocabSize", gguf_max_vocab_size + 1);
}

BOOST_AUTO_TEST_CASE(refuses_truncated_json_naming_the_file) {
    Folder folder(small_model);
    const std::string text = read_text(folder.dir / "tokenizer.json");
    write_text(folder.dir / "tokenizer.json", text.substr(0, text.size() / 2));
    check_refusal(folder, "tokenizer.json", "BadJson");

    Folder config(small_model);
    config.with("tokenizer_config.json", R"({"bos_token": "<s>")");
    check_refusal(config, "tokenizer_config.json", "BadJson");

    Folder negative(small_model);
    negative.with("config.json", R"({"pad_token_id": -1})");
    check_refusal(negative, "config.json", "BadSpecialTokenId");
}

BOOST_AUTO_TEST_SUITE_END()
