// tokenizer.json and tokenizer_config.json of a GGUF model read as a checkpoint, rebuilt from
// tokenizer.ggml.* so that text calibration (--dataset) works on a GGUF alone: the tokenizer llama.cpp
// runs on the file, written as Hugging Face's tokenizers describe it. llama.cpp splits a gpt2
// (byte-level BPE) vocabulary's text with the regular expressions its `tokenizer.ggml.pre` names
// (src/llama-vocab.cpp), in order, each piece kept (Hugging Face's Split, "Isolated"), then applies
// the merges in rank order; it does not normalize. Rebuilt: the gpt2 model with the pre-tokenizers
// qwen2, deepseek-v3, glm4 and minimax-m2, and the llama (SentencePiece) model, its merges ranked
// by the pieces' scores. Others give no tokenizer (`missing` says why): docs/gguf-source.md.
#pragma once

#include "gguf_container.hpp"

#include <optional>
#include <string>

namespace moequant::formats {

struct GgufSourceTokenizer {
    std::string tokenizer_json, tokenizer_config_json;
    std::string missing;  // why there is none (when the texts are empty)
};

// Error(input) naming `file` for a vocabulary that is broken (ids out of range, arrays of the wrong
// length or type); `missing` set for one whose tokenizer is not rebuilt.
GgufSourceTokenizer gguf_source_tokenizer(const GgufFile& first, const std::string& file);

}  // namespace moequant::formats
