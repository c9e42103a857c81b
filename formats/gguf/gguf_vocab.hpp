// llama.cpp's GGUF tokenizer metadata (tokenizer.ggml.* and tokenizer.chat_template) for a byte-level
// BPE ("gpt2") tokenizer, built from a Hugging Face model folder's tokenizer.json,
// tokenizer_config.json, config.json and chat template files, as convert_hf_to_gguf.py writes it
// (TextModel._set_vocab_gpt2 / get_vocab_base and gguf-py's SpecialVocab; docs in
// /work/research/gguf-writer.md §3).
#pragma once

#include "gguf_container.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace moequant::formats {

// What the caller knows that the files do not: the pre-tokenizer name llama.cpp's converter would
// find by hashing (e.g. "qwen2", "deepseek-v3"), and the vocabulary size to pad to (config.json
// vocab_size, or the text_config's; 0 = the tokenizer's own size).
struct GgufVocabRequest {
    std::string pre;
    std::int64_t vocab_size = 0;
    // Special tokens a family's converter names by their text after SpecialVocab has read the
    // files (e.g. GLM's bos "[gMASK]", eot "<|user|>"): set, as _set_special_token does, only
    // where the files named none of that type, and only when the tokenizer has the added token.
    std::vector<std::pair<std::string, std::string>> named_specials;  // {type, content}
};

// The largest vocabulary accepted (ids and vocab_size are bounded by it before anything is
// allocated): real ones are below 300k.
inline constexpr std::int64_t gguf_max_vocab_size = std::int64_t{1} << 24;

// tokenizer.ggml.model "gpt2", .pre, .tokens, .token_type, .merges, the special token ids
// (bos/eos/unknown/seperator/padding as u32, each only when found), add_bos_token/add_eos_token
// (bool, when decidable), and tokenizer.chat_template (when the folder has one), in the order
// llama.cpp's converter adds them. Error(ErrorKind::input) naming the file for a tokenizer that
// is not BPE, unreadable JSON, ids out of range, duplicate ids, a vocab larger than vocab_size.
std::vector<GgufKeyValue> gguf_bpe_vocab(const std::filesystem::path& model_dir, const GgufVocabRequest& request);

// tokenizer.ggml.model "llama" (SentencePiece), .pre, .tokens, .scores (f32), .token_type, the
// special token ids, add_bos/add_eos, the chat template and add_space_prefix, as llama.cpp's
// converter writes them for LlamaModel (Mixtral): from tokenizer.model when the folder has one,
// else from a byte-fallback BPE tokenizer.json (LlamaHfVocab: every score -1000, <0xNN> BYTE,
// the tokenizer's special tokens CONTROL, not padded). Error(ErrorKind::input) naming the file
// for a malformed tokenizer.model, ids out of range or reused, a vocab_size that does not fit.
std::vector<GgufKeyValue> gguf_llama_vocab(const std::filesystem::path& model_dir, const GgufVocabRequest& request);

}  // namespace moequant::formats
