// Text to token ids with a model's own Hugging Face `tokenizer.json`, for calibration data.
//
// Supported: BPE models, byte-level (DeepSeek-V3, Qwen3, GLM: Split pre-tokenizers with their
// Unicode regexes, run by PCRE2) and SentencePiece-style (Mixtral, Llama-2: normalizers that
// prepend and replace "▁", byte fallback, fused unknowns); normalizers Sequence, NFC/NFD/NFKC/
// NFKD (utf8proc), Prepend, Replace, Lowercase, Strip; pre-tokenizers Sequence, Split,
// ByteLevel, Metaspace, Digits; added tokens (special or not) matched leftmost-longest before
// the model, honouring lstrip/rstrip/single_word/normalized; post-processors TemplateProcessing,
// ByteLevel, Roberta/Bert and Sequence. A Llama-style tokenizer_config.json beside the file
// (tokenizer_class LlamaTokenizer[Fast], ...) adds BOS/EOS by its add_bos_token/add_eos_token,
// as transformers does. Anything else in the file is refused with Error(input) naming it.
#pragma once


#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moequant {

class Tokenizer {
public:
    // Reads `tokenizer_json` and, when present, tokenizer_config.json in the same folder.
    static Tokenizer load(const std::filesystem::path& tokenizer_json);
    // From the two files' text (`config_json` may be empty); `source` names them in errors.
    static Tokenizer parse(std::string_view tokenizer_json, std::string_view config_json, const std::string& source);

    // The ids of `text` (UTF-8; invalid bytes are an Error(input)). With add_special_tokens the
    // post-processor's tokens (e.g. BOS) are added, as `tokenizer(text)` does in transformers;
    // without, as `tokenizer(text, add_special_tokens=False)` (chat templates bring their own).
    std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = false) const;

    // The id of a vocabulary or added token, by its exact content.
    std::optional<std::int32_t> token_id(std::string_view token) const;
    // One more than the highest id (vocabulary and added tokens).
    std::int64_t vocab_size() const noexcept;

private:
    struct Impl;
    explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<const Impl> impl_;
};

}  // namespace moequant
