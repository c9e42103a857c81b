// A GGUF model read as a checkpoint (`convert -i model.gguf`, `gptq --model_id model.gguf`): the
// CheckpointReader the gguf plugin registers. Its tensors are presented under the Hugging Face
// names of the family (the inverse of the gguf format's mapping, gguf_architecture.cpp):
//   - F32, F16 and BF16 tensors stored as the checkpoint has them: the tensor itself, its ggml
//     dims reversed (ne {in, out} is [out, in]);
//   - the stacked experts blk.L.ffn_{gate,up,down}_exps, [E, out, in]: one tensor per expert, a
//     byte range of the stack, under the family's per-expert name;
//   - a tensor of a ggml block type: `<weight>.gguf.<type>` (U8 [rows, bytes per row]), which the
//     `ggml` encoding (ggml_encoding.hpp) decodes as ggml's dequantizer does;
//   - what the converter did more than rename: llama's Q/K rows interleaved per head,
//     `<weight>.gguf_rope<heads>.<type>`; deepseek2's kv_b_proj split into attn_k_b / attn_v_b,
//     `<kv_b_proj>.gguf_k_b.<type>` and `.gguf_v_b.<type>` — each decoded back by the encoding.
// config.json comes from the metadata (gguf_source_config.hpp). docs/gguf-source.md.
#pragma once

#include <moequant/checkpoint_reader.hpp>

namespace moequant::formats {

class GgufCheckpointReader final : public CheckpointReader {
public:
    std::string_view id() const override { return "gguf"; }
    std::string_view description() const override { return "llama.cpp GGUF models (single or split) as source checkpoints"; }
    bool recognises(const std::filesystem::path& path) const override;
    CheckpointDescription describe(const std::filesystem::path& path) const override;
};

}  // namespace moequant::formats
