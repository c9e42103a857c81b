// The `ggml` source encoding: the weights of a GGUF model read as a checkpoint
// (gguf_checkpoint_reader.hpp) that are not plain safetensors tensors, decoded as ggml's
// dequantizers decode them (ggml_types.hpp: the float operations of ggml's to_float, in float32),
// then rounded to BF16 (nearest even) for the BF16 target, as the value rule of every encoding
// has it (docs/encodings.md). Its parts, by name:
//   <weight>.gguf.<type>            rows of a ggml type, as stored
//   <weight>.gguf_rope<H>.<type>    llama's attn_q / attn_k: each of H heads' rows interleaved (the
//                                   converter's permute), read back in Hugging Face's half-split order
//   <weight>.gguf_k_b.<type>,       deepseek2's attn_k_b [heads, kv_lora, nope] and attn_v_b
//   <weight>.gguf_v_b.<type>        [heads, v, kv_lora]: kv_b_proj [heads * (nope + v), kv_lora] again
#pragma once

#include <moequant/source_encoding.hpp>

namespace moequant::formats {

class GgmlEncoding final : public SourceEncoding {
public:
    std::string_view id() const override { return "ggml"; }
    std::string_view description() const override {
        return "ggml tensor types of a GGUF model read as a checkpoint (Q4_K, Q8_0, IQ4_XS, ...)";
    }
    std::vector<std::string> input_types() const override { return {"gguf"}; }
    std::optional<std::string> weight_of(const TensorInfo& tensor) const override;
    int recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig* config, EncodedWeight& out) const override;
    void decode(const Checkpoint& checkpoint, const EncodedWeight& weight, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out) const override;
};

}  // namespace moequant::formats
