#include "synth_side_files.hpp"

#include <boost/json.hpp>

namespace moequant::adapters {

void add_tokenizer_files(SynthModel& model, const SynthTokenizer& tokenizer) {
    model.side_files.emplace_back("tokenizer.json", tokenizer.tokenizer_json);
    model.side_files.emplace_back("tokenizer_config.json", tokenizer.tokenizer_config_json);
    model.side_files.emplace_back("special_tokens_map.json", tokenizer.special_tokens_map_json);
    boost::json::object generation{{"_from_model_config", true}};
    if (tokenizer.bos_token_id >= 0) generation["bos_token_id"] = tokenizer.bos_token_id;
    if (tokenizer.eos_token_id >= 0) generation["eos_token_id"] = tokenizer.eos_token_id;
    generation["transformers_version"] = "4.57.1";
    model.side_files.emplace_back("generation_config.json", pretty_json(generation));
}

SynthTokenizer qwen_style_tokenizer(std::int64_t vocab_size) {
    TokenizerRequest request;
    request.vocab_size = vocab_size;
    request.special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    request.eos_token = "<|im_end|>";
    return make_synth_tokenizer(request);
}

SynthTokenizer minimax_style_tokenizer(std::int64_t vocab_size) {
    return make_synth_tokenizer(
        {.vocab_size = vocab_size, .special_tokens = {"]~!b[", "]~b]", "[e~["}, .bos_token = "]~!b[", .eos_token = "[e~["});
}

SynthTokenizer glm_style_tokenizer(std::int64_t vocab_size) {
    TokenizerRequest request;
    request.vocab_size = vocab_size;
    request.special_tokens = {"<|endoftext|>", "[gMASK]", "<sop>", "<|user|>", "<|assistant|>"};
    request.eos_token = "<|endoftext|>";
    return make_synth_tokenizer(request);
}

}  // namespace moequant::adapters
