// What the encoding plugins share: where a checkpoint's quantization_config lives, suffix
// matching on tensor names, and errors that name the shard and tensor. Header-only.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/model_config.hpp>
#include <moequant/source_encoding.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace moequant::encodings {

// `name` without `suffix`, or nullopt when it does not end with it (or is nothing else).
inline std::optional<std::string> strip_suffix(std::string_view name, std::string_view suffix) {
    if (name.size() <= suffix.size() || !name.ends_with(suffix)) return std::nullopt;
    return std::string(name.substr(0, name.size() - suffix.size()));
}

// quantization_config, text_config's first (Kimi-K2.5 nests it there), else the root's.
inline std::optional<ConfigValue> quantization_config(const ModelConfig* config) {
    if (!config) return std::nullopt;
    auto q = config->find("quantization_config");
    if (q && q->is_object()) return q;
    return std::nullopt;
}

// A string member of an object, or "" when absent or not a string.
inline std::string string_member(const ConfigValue& object, std::string_view key) {
    auto v = object.get(key);
    return v && v->is_string() ? v->as_string() : std::string();
}

// ASCII letters made lower case (config spellings such as "GEMM" and "gemm" are one).
inline std::string lower_case(std::string text) {
    for (char& c : text) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return text;
}

// quantization_config's quant_method in lower case ("awq", "gptq", ...), "" when there is none.
inline std::string quant_method(const ModelConfig* config) {
    const auto q = quantization_config(config);
    return lower_case(q ? string_member(*q, "quant_method") : std::string());
}

// The shard file holding a tensor, for messages.
inline std::string file_of(const Checkpoint& checkpoint, const std::string& tensor) {
    if (!checkpoint.contains(tensor)) return checkpoint.directory().string();
    return (checkpoint.directory() / checkpoint.shard_of(tensor)).string();
}

// Error(input) naming the tensor and its shard: the one-line refusal every encoding gives.
[[noreturn]] inline void refuse(const Checkpoint& checkpoint, const std::string& tensor, const std::string& message,
                                const std::string& code, const std::string& hint = {}) {
    throw Error(ErrorKind::input, message, {.file = file_of(checkpoint, tensor), .tensor = tensor, .code = code, .hint = hint});
}

// "<name> <dtype> <shape>" of a tensor, for messages.
inline std::string describe(const Checkpoint& checkpoint, const std::string& tensor) {
    const TensorInfo& info = checkpoint.info(tensor);
    return tensor + " " + std::string(dtype_name(info.dtype)) + " " + shape_to_string(info.shape);
}

// Error(input, "ScaleShapeMismatch") naming `tensor` unless it has the shape `primary` (the
// packed words it belongs to) needs, and why.
inline void expect_shape(const Checkpoint& checkpoint, const std::string& tensor, const Shape& expected, const std::string& primary,
                         const std::string& why) {
    const TensorInfo& info = checkpoint.info(tensor);
    if (info.shape == expected) return;
    refuse(checkpoint, tensor,
           "has shape " + shape_to_string(info.shape) + ", but " + describe(checkpoint, primary) + " needs " +
               shape_to_string(expected) + " (" + why + ")",
           "ScaleShapeMismatch");
}

// A config problem: Error(input) pointing at config.json and naming the weight it stops.
[[noreturn]] inline void refuse_config(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& tensor,
                                       const std::string& message, const std::string& code, const std::string& hint = {}) {
    const std::string file = config ? config->source() : (checkpoint.directory() / "config.json").string();
    throw Error(ErrorKind::input, message, {.file = file, .tensor = tensor, .code = code, .hint = hint});
}

// A (row, column) window of a 2-D or 3-D tensor of `element_bytes`-sized elements, as a byte
// offset: matrix m, row r, column c of [.., rows, cols].
inline std::size_t element_offset(const Shape& shape, std::int64_t m, std::int64_t r, std::int64_t c,
                                  std::size_t element_bytes) {
    const std::int64_t rows = shape[shape.size() - 2], cols = shape.back();
    return static_cast<std::size_t>((m * rows + r) * cols + c) * element_bytes;
}

}  // namespace moequant::encodings
