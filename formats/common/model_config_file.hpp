// Reading JSON side files and writing an output's config.json: the source's, with any
// quantization_config and expert_dtype (top level and text_config) removed and, for quantized formats, ours put
// in its place. Header-only, shared by the format modules.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/input_file.hpp>
#include <moequant/output_file.hpp>

#include <boost/json.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace moequant::formats {

// `text` parsed; Error(input, "BadJson") naming `file` when it does not parse.
inline boost::json::value parsed_json(const std::string& text, const std::string& file) {
    try {
        return boost::json::parse(text);
    } catch (const std::exception& e) {
        throw Error(ErrorKind::input, std::string("is not valid JSON: ") + e.what(), {.file = file, .code = "BadJson"});
    }
}

// The same for a file.
inline boost::json::value read_json_file(const std::filesystem::path& file) {
    return parsed_json(read_small_file(file, json_file_limit), file.string());
}

// `torch_dtype` (gptq --torch_dtype): the dtype the unquantized tensors were written in, put
// wherever the source names one ("torch_dtype", or "dtype" as transformers ≥ 4.56 writes it;
// top level and text_config), at the top level as "torch_dtype" when it names none.
// The text write_model_config() writes (--dry-run sizes it).
inline std::string model_config_text(const Checkpoint& source, std::optional<boost::json::object> quantization_config,
                                     const std::optional<std::string>& torch_dtype = std::nullopt) {
    const std::string config_file = (source.directory() / "config.json").string();
    const std::optional<std::string> text = source.side_file("config.json");
    if (!text) throw Error(ErrorKind::input, "the model has no config.json", {.file = config_file, .code = "MissingConfig"});
    boost::json::value config = parsed_json(*text, config_file);
    if (auto* o = config.if_object()) {
        // text_config, then the top level: erasing a key of the top level moves its other
        // members (boost::json::object fills the hole with its last one), so no pointer into it
        // outlives a change to it.
        auto each_level = [o](auto&& change) {
            if (auto* text = o->if_contains("text_config"); text && text->is_object()) change(text->as_object(), false);
            change(*o, true);
        };
        // DeepSeek-V4's `expert_dtype: fp4` announces MXFP4 experts, which no output holds.
        each_level([](boost::json::object& c, bool) {
            c.erase("quantization_config");
            c.erase("expert_dtype");
        });
        if (quantization_config) (*o)["quantization_config"] = std::move(*quantization_config);
        if (torch_dtype) {
            bool named = false;
            each_level([&](boost::json::object& c, bool top) {
                for (const char* key : {"torch_dtype", "dtype"})
                    if (auto* v = c.if_contains(key)) {
                        *v = *torch_dtype;
                        named = named || top;
                    }
            });
            if (!named) (*o)["torch_dtype"] = *torch_dtype;
        }
    }
    return boost::json::serialize(config) + "\n";
}

inline void write_model_config(const Checkpoint& source, const std::filesystem::path& out_dir,
                               std::optional<boost::json::object> quantization_config,
                               const std::optional<std::string>& torch_dtype = std::nullopt) {
    write_file_atomically(out_dir / "config.json", model_config_text(source, std::move(quantization_config), torch_dtype));
}

}  // namespace moequant::formats
