// What --overwrite may remove from an output folder: the entries a conversion writes and
// nothing else (README "Output folders"):
//   shards (*.safetensors), the index (*.safetensors.index.json), kt trees (_layer_N/_numa_M/*.kt),
//   the run manifest (moequant-run.json), the side files a conversion copies (config.json,
//   tokenizer.json, tokenizer_config.json, special_tokens_map.json, generation_config.json,
//   chat_template.jinja), the tool's own partials (".*.moequant.partial") and any file an earlier
//   run's manifest lists. The held lock file stays.
// Anything else refuses the whole overwrite before anything is removed: Error(io,
// "ForeignEntry") naming the entry. Symbolic links are removed as links, never followed.
#pragma once

#include <moequant/export.hpp>

#include <array>
#include <filesystem>
#include <set>
#include <string>

namespace moequant {

// The model side files the output formats copy next to the weights (each format a subset).
inline constexpr std::array<const char*, 6> copied_side_files = {
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
    "chat_template.jinja"};

// True when a conversion writes an entry of this name (and kind) at the top of its output.
MOEQUANT_API bool is_conversion_output_entry(const std::filesystem::directory_entry& entry);

// Empties `dir` of what a conversion writes, after checking that it holds nothing else.
// `also_owned` adds top-level names the caller knows it wrote (an earlier manifest's files,
// the files of the checkpoint synth is replacing).
MOEQUANT_API void clear_for_overwrite(const std::filesystem::path& dir, const std::set<std::string>& also_owned = {});

}  // namespace moequant
