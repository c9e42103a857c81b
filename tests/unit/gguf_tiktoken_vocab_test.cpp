// The gpt2 tokenizer metadata from a tiktoken vocabulary (formats/gguf/gguf_tiktoken_vocab), as
// llama.cpp's converter writes Kimi-K2's: Qwen3's real vocabulary, which came from tiktoken
// ranks, written back as a tiktoken.model rebuilds tokenizer.json's 151387 merges in order; the
// special slots after the ranks take tokenizer_config.json's names or <|reserved_token_N|>; and
// malformed files are refused naming the file and line.
#include "gguf_metadata_lookup.hpp"
#include "gguf_tiktoken_vocab.hpp"
#include "gguf_vocab.hpp"

#include "test_support.hpp"

#include <moequant/error.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace moequant;
using namespace moequant::formats;
using namespace moequant::test;

namespace {

const fs::path unpacked_dir = MOEQUANT_TOKENIZER_UNPACKED_DIR;

// The byte each character of GPT-2's byte-level alphabet stands for (its definition: printable
// Latin-1 for itself, the rest from U+0100 in byte order), by the character's UTF-8.
std::map<std::string, char> byte_of_glyph() {
    std::map<std::string, char> out;
    int next = 0x100;
    for (int b = 0; b < 256; ++b) {
        const bool shown = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        const int c = shown ? b : next++;
        std::string utf8 = c < 0x80 ? std::string(1, static_cast<char>(c))
                                    : std::string{static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
        out[utf8] = static_cast<char>(b);
    }
    return out;
}

std::string base64(const std::string& bytes) {
    static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (std::size_t i = 0; i < bytes.size(); i += 3) {
        const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
        std::uint32_t group = 0;
        for (std::size_t k = 0; k < 3; ++k) group = group << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
        for (std::size_t k = 0; k < 4; ++k) out += k <= n ? digits[(group >> (18 - 6 * k)) & 63] : '=';
    }
    return out;
}

// A tokenizer.json vocabulary's tokens below `base` as tiktoken.model lines (bytes, rank = id).
std::string tiktoken_lines(const boost::json::object& vocab, std::int64_t base) {
    const auto glyphs = byte_of_glyph();
    std::map<std::int64_t, std::string> by_id;
    for (const auto& [text, id] : vocab) {
        if (id.to_number<std::int64_t>() >= base) continue;
        std::string bytes;
        for (std::size_t at = 0; at < text.size();) {
            const std::size_t n = (static_cast<unsigned char>(text[at]) < 0x80) ? 1 : 2;
            bytes += glyphs.at(std::string(text.substr(at, n)));
            at += n;
        }
        by_id[id.to_number<std::int64_t>()] = bytes;
    }
    std::string out;
    for (const auto& [id, bytes] : by_id) out += base64(bytes) + " " + std::to_string(id) + "\n";
    return out;
}

void check_refused(const std::string& content, const std::string& needle) {
    TempDir dir;
    write_text(dir / "tiktoken.model", content);
    BOOST_CHECK_EXCEPTION(formats::gguf_tiktoken_vocab(dir.path(), {.pre = "kimi-k2"}), Error, [&](const Error& e) {
        BOOST_TEST_MESSAGE(e.what());
        return e.kind() == ErrorKind::input && e.code() == "BadTiktoken" && contains(e.context().file, "tiktoken.model") &&
               contains(e.what(), needle);
    });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_tiktoken_vocab)

BOOST_AUTO_TEST_CASE(qwen3_ranks_rebuild_its_merges_and_tokens) {
    const auto tokenizer = boost::json::parse(read_text(unpacked_dir / "qwen3" / "tokenizer.json")).as_object();
    const auto& vocab = tokenizer.at("model").at("vocab").as_object();
    const auto base = static_cast<std::int64_t>(vocab.size());  // 151643, the added tokens follow
    TempDir dir;
    write_text(dir / "tiktoken.model", tiktoken_lines(vocab, base));
    const auto from_ranks = formats::gguf_tiktoken_vocab(dir.path(), {.pre = "kimi-k2", .vocab_size = 151936});
    const auto from_json = gguf_bpe_vocab(unpacked_dir / "qwen3", {.pre = "qwen2", .vocab_size = 151936});

    const auto merges = strings_at(from_ranks, "tokenizer.ggml.merges");
    const auto expected = strings_at(from_json, "tokenizer.ggml.merges");
    BOOST_TEST(merges.size() == 151387u);
    BOOST_TEST(merges == expected);  // every merge, in tokenizer.json's order

    const auto tokens = strings_at(from_ranks, "tokenizer.ggml.tokens");
    const auto json_tokens = strings_at(from_json, "tokenizer.ggml.tokens");
    BOOST_TEST_REQUIRE(tokens.size() == 151936u);
    BOOST_TEST((std::vector<std::string>(tokens.begin(), tokens.begin() + base) ==
                std::vector<std::string>(json_tokens.begin(), json_tokens.begin() + base)));
    BOOST_TEST(find(from_ranks, "tokenizer.ggml.pre")->as_string().value() == "kimi-k2");
    // No tokenizer_config: every slot of the 256 after the ranks is reserved, then padding.
    const auto types = types_of(from_ranks);
    BOOST_TEST(tokens[static_cast<std::size_t>(base)] == "<|reserved_token_151643|>");
    BOOST_TEST(types[static_cast<std::size_t>(base)] == 3);  // CONTROL
    BOOST_TEST(tokens[static_cast<std::size_t>(base) + 255] == "<|reserved_token_151898|>");
    BOOST_TEST(tokens[static_cast<std::size_t>(base) + 256] == "[PAD151899]");
    BOOST_TEST(types[static_cast<std::size_t>(base) + 256] == 5);  // UNUSED
    BOOST_TEST(types[0] == 1);
}

// Kimi's slots: tokenizer_config.json's added_tokens_decoder names them; without tokenizer.json
// SpecialVocab takes the ids from config.json.
BOOST_AUTO_TEST_CASE(special_slots_take_their_names_and_config_ids) {
    TempDir dir;
    write_text(dir / "tiktoken.model", base64("a") + " 0\n" + base64("b") + " 1\n" + base64("ab") + " 2\n");
    write_text(dir / "tokenizer_config.json",
               R"({"added_tokens_decoder": {"3": {"content": "[BOS]", "special": true}, "4": {"content": "[EOS]", "special": true},
                   "7": {"content": "<|im_end|>", "special": true}}, "bos_token": "[BOS]", "eos_token": "[EOS]",
                   "chat_template": "{{ messages }}"})");
    write_text(dir / "config.json", R"({"bos_token_id": 3, "eos_token_id": 7})");
    const auto kvs = formats::gguf_tiktoken_vocab(dir.path(), {.pre = "kimi-k2", .vocab_size = 8});
    const auto tokens = strings_at(kvs, "tokenizer.ggml.tokens");
    BOOST_TEST(tokens == (std::vector<std::string>{"a", "b", "ab", "[BOS]", "[EOS]", "<|reserved_token_5|>", "<|reserved_token_6|>", "<|im_end|>"}),
               boost::test_tools::per_element());
    BOOST_TEST(types_of(kvs) == (std::vector<std::int32_t>{1, 1, 1, 3, 3, 3, 3, 3}), boost::test_tools::per_element());
    BOOST_TEST(strings_at(kvs, "tokenizer.ggml.merges") == std::vector<std::string>{"a b"});
    BOOST_TEST(find(kvs, "tokenizer.ggml.bos_token_id")->as_unsigned().value() == 3u);
    BOOST_TEST(find(kvs, "tokenizer.ggml.eos_token_id")->as_unsigned().value() == 7u);  // config.json's, not tokenizer_config's
    BOOST_TEST(find(kvs, "tokenizer.chat_template")->as_string().value() == "{{ messages }}");
}

BOOST_AUTO_TEST_CASE(malformed_files_are_refused_naming_the_file) {
    check_refused("", "holds no token");
    check_refused("YQ== 0\nYg 1\n", "line 2 is not");                  // unpadded base64
    check_refused("YQ== 0\nYg==\n", "line 2 is not");                  // no rank
    check_refused("YQ== 0\nYg== x1\n", "line 2 is not");
    check_refused("YQ== 0\nYg== 0\n", "gives rank 0 a second time");
    check_refused("YQ== 0\nYQ== 1\n", "repeats the token");
    check_refused("YQ== 0\nYg== 5\n", "the ranks must be 0..1");     // a gap would give an id two tokens
    check_refused("YQ== 99999999999\n", "has rank");
    check_refused("Y*== 0\n", "line 1 is not");
}

BOOST_AUTO_TEST_SUITE_END()
