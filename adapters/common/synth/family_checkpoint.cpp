#include "family_checkpoint.hpp"

namespace moequant::adapters {

boost::json::object family_config(const SynthTokenizer& tokenizer, SynthEncoding encoding, const SynthSizes& sizes,
                                  const ExpertSizeKeys& keys, const ConfigIdentity& identity) {
    boost::json::object c = base_config(tokenizer.vocab_size, tokenizer.bos_token_id, tokenizer.eos_token_id, encoding);
    c["model_type"] = identity.model_type;
    if (!identity.architecture.empty()) c["architectures"] = boost::json::array{identity.architecture};
    c["hidden_size"] = sizes.hidden;
    c["num_hidden_layers"] = sizes.layers;
    c["num_attention_heads"] = sizes.heads;
    c["num_key_value_heads"] = sizes.kv_heads;
    if (sizes.head_dim > 0) c["head_dim"] = sizes.head_dim;
    c["num_experts_per_tok"] = sizes.top_k;
    c[keys.count.front()] = sizes.experts;
    c[keys.size.front()] = sizes.expert_intermediate;
    return c;
}

void write_family_checkpoint(const FamilyCheckpoint& checkpoint, const std::filesystem::path& directory,
                             const SynthSettings& settings) {
    SynthModel model;
    model.encoding = checkpoint.encoding.value_or(settings.encoding);
    model.fp8_power_of_two_scales = checkpoint.fp8_power_of_two_scales;
    model.config = checkpoint.config;
    add_tokenizer_files(model, checkpoint.tokenizer);
    auto& t = model.tensors;
    const std::int64_t vocab = checkpoint.vocab > 0 ? checkpoint.vocab : checkpoint.tokenizer.vocab_size, hidden = checkpoint.hidden;
    if (checkpoint.before_embedding) checkpoint.before_embedding(t);
    t.push_back(embedding_weight(checkpoint.root + checkpoint.embedding, vocab, hidden));
    for (std::int64_t layer = 0; layer < checkpoint.layers; ++layer)
        checkpoint.layer(t, checkpoint.root + "layers." + std::to_string(layer) + ".", layer);
    t.push_back(norm_weight(checkpoint.root + "norm.weight", hidden));
    t.push_back(bf16_tensor(checkpoint.head, {vocab, hidden}));
    if (checkpoint.after_head) checkpoint.after_head(t);
    model.shard_count = checkpoint.shard_count;
    model.shard_name = checkpoint.shard_name;
    write_synth_model(model, directory, settings);
}

}  // namespace moequant::adapters
