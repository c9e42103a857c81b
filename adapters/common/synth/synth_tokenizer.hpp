// Small, working Hugging Face tokenizers for synthetic checkpoints.
//
// `moequant synth` writes tokenizer.json, tokenizer_config.json and special_tokens_map.json
// next to its random weights. They are real BPE tokenizers (loadable by Hugging Face
// `tokenizers` / transformers), trained at run time on a short public-domain text compiled into
// the tool, so their vocabulary size can match any config's vocab_size within what the text
// allows.
#pragma once

#include <moequant/embedded_text.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::adapters {

// The public-domain (CC0) training text: the SDK's embedded calibration text.
inline std::string_view embedded_text() noexcept { return embedded_calibration_text(); }

enum class TokenizerStyle {
    byte_level_bpe,     // GPT-2/Qwen/DeepSeek/GLM style: ByteLevel pre-tokenizer and decoder, BPE over byte symbols
    sentencepiece_bpe,  // Llama-2/Mixtral style: "▁" for spaces, BPE over characters, byte_fallback with <0xNN> tokens
};

struct TokenizerRequest {
    TokenizerStyle style = TokenizerStyle::byte_level_bpe;
    std::int64_t vocab_size = 512;               // total number of ids, special tokens included
    // Added tokens, in id order (e.g. bos, eos, pad...). byte_level_bpe: they take the last ids.
    // sentencepiece_bpe: must start with "<unk>", "<s>", "</s>" (ids 0, 1, 2, also in the model
    // vocab); any further ones take the last ids.
    std::vector<std::string> special_tokens;
    std::string bos_token;                       // must be one of special_tokens (may be empty: none)
    std::string eos_token;                       // must be one of special_tokens (may be empty: none)
    std::string chat_template;                   // copied into tokenizer_config.json (may be empty)
};

struct SynthTokenizer {
    std::string tokenizer_json;           // tokenizer.json text
    std::string tokenizer_config_json;    // tokenizer_config.json text
    std::string special_tokens_map_json;  // special_tokens_map.json text
    std::int64_t vocab_size = 0;          // == request.vocab_size
    std::int64_t bos_token_id = -1;       // -1 when there is no bos token
    std::int64_t eos_token_id = -1;       // -1 when there is no eos token
};

// Trains BPE merges on embedded_text() until the vocabulary (base symbols + merges + special
// tokens) has exactly request.vocab_size ids. Deterministic (ties broken by a fixed rule).
// Throws moequant::Error (ErrorKind::usage, from <moequant/error.hpp>) when vocab_size is too
// small for the base symbols and special tokens, or too large for what the text can provide.
// Also throws it for malformed special tokens (empty, repeated, clashing with an ordinary
// token, or a bos/eos that is not among them).
SynthTokenizer make_synth_tokenizer(const TokenizerRequest& request);

}  // namespace moequant::adapters
