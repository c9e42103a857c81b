// llama.cpp's gpt2 tokenizer metadata from a tiktoken vocabulary (tiktoken.model: one
// "base64(bytes) rank" line per token), as convert_hf_to_gguf.py's DeepseekV2Model.set_vocab
// writes Kimi-K2's (pre "kimi-k2"): the tokens in GPT-2's byte-level alphabet by rank, the merges
// rebuilt from the ranks (QwenModel.bpe: a token is a merge of the two parts its own BPE stops
// at), the 256 special slots after the ranks (tokenizer_config.json's added_tokens_decoder names,
// "<|reserved_token_{id}|>" for the others; CONTROL), [PAD{id}] up to vocab_size, then gguf-py's
// SpecialVocab (without tokenizer.json: the special ids from config.json).
#pragma once

#include "gguf_container.hpp"
#include "gguf_vocab.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace moequant::formats {

inline constexpr const char* tiktoken_file_name = "tiktoken.model";

// One token of a tiktoken vocabulary: its bytes and rank (= id).
struct TiktokenRank {
    std::string bytes;
    std::int64_t rank = 0;
};

// The ranks of `file` in file order. Error(input) naming the file and line for a line that is not
// "base64 rank", a rank or token given twice, a rank at or past gguf_max_vocab_size.
std::vector<TiktokenRank> read_tiktoken_ranks(const std::filesystem::path& file);

// The merges QwenModel.bpe rebuilds from `ranks` ("a b", each part in the byte-level alphabet),
// in rank order of the merged tokens.
std::vector<std::string> tiktoken_merges(const std::vector<TiktokenRank>& ranks);

// `bytes` in GPT-2's byte-level alphabet (QwenModel.token_bytes_to_string).
std::string byte_level_text(std::string_view bytes);

// tokenizer.ggml.* (model gpt2, request.pre, tokens, token_type, merges, special ids, add_bos/
// add_eos, chat template) from model_dir's tiktoken.model, tokenizer_config.json and config.json.
std::vector<GgufKeyValue> gguf_tiktoken_vocab(const std::filesystem::path& model_dir, const GgufVocabRequest& request);

}  // namespace moequant::formats
