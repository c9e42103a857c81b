// The files next to the weights that every synthetic checkpoint carries: tokenizer.json,
// tokenizer_config.json, special_tokens_map.json and generation_config.json.
#pragma once

#include "synth_tokenizer.hpp"
#include "synth_writer.hpp"

namespace moequant::adapters {

void add_tokenizer_files(SynthModel& model, const SynthTokenizer& tokenizer);

// The Qwen family's byte-level tokenizer: <|endoftext|>, <|im_start|>, <|im_end|> (the eos),
// no bos token.
SynthTokenizer qwen_style_tokenizer(std::int64_t vocab_size);

// GLM's byte-level tokenizer (GLM-4.5 and GLM-5): <|endoftext|> (the eos), [gMASK], <sop>,
// <|user|>, <|assistant|>, no bos token.
SynthTokenizer glm_style_tokenizer(std::int64_t vocab_size);

// MiniMax's (M2.x and M3): ]~!b[ (the bos), ]~b] (the role marker), [e~[ (the eos).
SynthTokenizer minimax_style_tokenizer(std::int64_t vocab_size);

}  // namespace moequant::adapters
