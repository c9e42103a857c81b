// Read access to a model's config.json (parsed with Boost.JSON inside the SDK).
//
// Multimodal checkpoints nest the language model's settings under `text_config` (Kimi-K2.5,
// Qwen3.5-MoE, Qwen3-VL-MoE, ...), and `quantization_config` may sit at either level.
// find() therefore looks in text_config first and falls back to the top level. Type errors
// and missing required keys throw Error(input) naming the file and the key path.
#pragma once

#include <moequant/export.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moequant {

class ModelConfig;

// A handle to one JSON value inside a loaded config; keeps the document alive.
class MOEQUANT_API ConfigValue {
public:
    bool is_null() const noexcept;
    bool is_bool() const noexcept;
    bool is_number() const noexcept;
    bool is_string() const noexcept;
    bool is_array() const noexcept;
    bool is_object() const noexcept;

    std::int64_t as_int() const;  // integers, or floats holding a whole number
    double as_double() const;
    bool as_bool() const;
    std::string as_string() const;
    std::vector<std::int64_t> as_int_array() const;

    // Object member, or nullopt (also when this is not an object).
    std::optional<ConfigValue> get(std::string_view key) const;
    std::vector<std::string> keys() const;  // object keys in file order
    std::size_t size() const noexcept;      // array length (0 for non-arrays)
    ConfigValue at(std::size_t index) const;

    // Where this value sits, e.g. "text_config.quantization_config.weight_block_size".
    const std::string& path() const noexcept { return path_; }
    // Compact JSON text of this value.
    std::string to_json() const;

private:
    friend class ModelConfig;
    struct Document;
    ConfigValue(std::shared_ptr<const Document> doc, const void* value, std::string path);
    [[noreturn]] void type_error(const char* expected) const;

    std::shared_ptr<const Document> doc_;
    const void* value_ = nullptr;  // a boost::json::value inside doc_
    std::string path_;
};

class MOEQUANT_API ModelConfig {
public:
    // Reads and parses a config.json file.
    static ModelConfig load(const std::filesystem::path& file);
    // Parses JSON text; `source` names it in messages.
    static ModelConfig parse(std::string_view json_text, const std::string& source);

    ConfigValue root() const;
    // The language model's settings: `text_config` when present (an object), else the root.
    ConfigValue text() const;
    bool has_text_config() const;

    // Looks up a dotted path ("quantization_config.weight_block_size") in text() first, then
    // in root().
    std::optional<ConfigValue> find(std::string_view dotted_path) const;
    // As find(), but missing keys are an Error(input) naming the key.
    ConfigValue require(std::string_view dotted_path) const;
    std::int64_t require_int(std::string_view dotted_path) const { return require(dotted_path).as_int(); }
    std::int64_t int_or(std::string_view dotted_path, std::int64_t fallback) const;
    std::string string_or(std::string_view dotted_path, const std::string& fallback) const;

    // text_config.model_type if present, else model_type, else "".
    std::string model_type() const;
    // The architectures list (text level first, then root); empty if absent.
    std::vector<std::string> architectures() const;

    const std::string& source() const noexcept;
    const std::string& raw_json() const noexcept;

private:
    std::shared_ptr<const ConfigValue::Document> doc_;
};

}  // namespace moequant
