// Which ggml type each tensor of a GGUF gets, as llama-quantize chooses it (llama.cpp
// src/llama-quant.cpp at 007dbbf: llama_tensor_get_type and its helpers; docs/gguf-format.md):
// a preset (Q4_K_M, Q8_0, IQ4_XS, ...) names a default type, the mixture rules raise sensitive
// tensors (attn_v, ffn_down of some layers, output) per category, layer and expert count,
// --tensor-type patterns (ECMAScript regexes searched in the name, first match wins) override
// them, and a row length the type cannot pack falls back to a type that can (not for
// --output-tensor-type / --token-embedding-type, which llama-quantize applies as given). Tensors llama.cpp
// never quantizes (norms, routers, 1-D tensors, names not ending in "weight") keep their source
// type. The rules keep llama-quantize's counters, so tensors are taken in its order.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::formats {

// ggml type ids the rules name (enum ggml_type).
namespace ggml_type_id {
inline constexpr std::uint32_t f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q2_k = 10, q3_k = 11, q4_k = 12,
                               q5_k = 13, q6_k = 14, iq4_nl = 20, iq4_xs = 23, i32 = 26, bf16 = 30, mxfp4 = 39;
}

// A llama-quantize preset: its name, general.file_type (enum llama_ftype) and default type.
struct GgufPreset {
    std::string name;
    std::uint32_t file_type = 0;
    std::uint32_t default_type = 0;
};
// The preset llama-quantize calls `name` (case-insensitive; Q4_K = Q4_K_M, Q5_K = Q5_K_M,
// Q3_K = Q3_K_M); nullopt for a name it does not know or moequant cannot write.
std::optional<GgufPreset> gguf_preset_named(std::string_view name);
// Every preset name gguf_preset_named() accepts, for messages.
std::vector<std::string> gguf_preset_names();
// ggml's name of type `id` ("q4_K"), and the type ggml names `name` (case-insensitive).
std::string_view ggml_type_name_of(std::uint32_t id) noexcept;
std::optional<std::uint32_t> ggml_type_named_id(std::string_view name) noexcept;

// One --tensor-type PATTERN=TYPE.
struct TensorTypeOverride {
    std::string pattern;  // lower-cased, as llama-quantize takes it
    std::regex regex;
    std::uint32_t type = 0;
};
// Parses "PATTERN=TYPE" as llama-quantize does; Error(usage) naming what is wrong.
TensorTypeOverride parse_tensor_type_override(std::string_view text);

struct GgufTypeRequest {
    GgufPreset preset;
    std::vector<TensorTypeOverride> overrides;
    std::optional<std::uint32_t> output_type, token_embedding_type;
    bool pure = false;              // --pure: no mixture rules
    bool leave_output = false;      // --leave-output-tensor
    bool has_importance = false;    // an importance matrix is given (changes IQ4_XS and Q4_0/Q5_0 rules)
};

// What the rules read from the model: {arch}.expert_count (0 for dense), n_head / n_head_kv of
// layer 0, and the block count (llama.cpp's n_layer_all, MTP layers included).
struct GgufModelFacts {
    int n_expert = 0;
    int n_gqa = 1;
    int n_layer = 0;
};

struct GgufTensorType {
    std::string name;                // the GGUF name, e.g. blk.3.ffn_down_exps.weight
    std::vector<std::int64_t> ne;    // dims, innermost first
    std::uint32_t source_type = 0;   // the type the converter writes it in (F32 norms, BF16 weights, ...)
    bool forced = false;             // the converter writes source_type whatever its outtype (DeepSeek-V4's)
    std::uint32_t type = 0;          // chosen: the source type when not quantized
    bool fell_back = false;          // the chosen type could not pack the rows; a fallback was taken
};

// The type of every tensor (name, ne and source_type set), in llama-quantize's order (tensors
// outside blocks by name, then block by block, by name within one); the result is in that order.
std::vector<GgufTensorType> choose_gguf_types(std::vector<GgufTensorType> tensors, const GgufModelFacts& facts,
                                              const GgufTypeRequest& request);

}  // namespace moequant::formats
