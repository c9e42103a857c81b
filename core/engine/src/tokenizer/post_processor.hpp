// What `add_special_tokens` adds around the ids: tokenizer.json "post_processor"
// (TemplateProcessing, Roberta/BertProcessing, ByteLevel, Sequence), or for Llama-style
// tokenizers the BOS/EOS of tokenizer_config.json (add_bos_token/add_eos_token), which is what
// transformers' LlamaTokenizerFast builds in place of the file's post-processor.
#pragma once

#include <boost/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::tokenization {

class PostProcessor {
public:
    using Lookup = std::function<std::optional<std::int32_t>(std::string_view)>;
    // `config`: tokenizer_config.json (null when absent). `lookup` finds a token's id.
    PostProcessor(const boost::json::value& json, const boost::json::value& config, const Lookup& lookup);

    std::vector<std::int32_t> apply(std::vector<std::int32_t> ids) const {
        ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
        ids.insert(ids.end(), suffix_.begin(), suffix_.end());
        return ids;
    }

private:
    void add(const boost::json::value& json, const Lookup& lookup);
    std::vector<std::int32_t> prefix_, suffix_;  // around the single sequence
};

}  // namespace moequant::tokenization
