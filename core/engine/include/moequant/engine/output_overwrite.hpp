// What --overwrite may remove from an output folder: only what the tool wrote there, and nothing
// else (docs/safety.md, "Output folders"). In a folder that holds a run manifest (a conversion's output):
//   shards (*.safetensors), the index (*.safetensors.index.json), kt trees (_layer_N/_numa_M/*.kt),
//   the run manifest (moequant-run.json), the side files a conversion copies (copied_side_files)
//   and any file the manifest lists. In any folder: the tool's own partials (".*.moequant.partial")
//   and the names the caller knows it writes (synth: the files of the checkpoint it replaces).
//   A folder with no manifest is not known to be a conversion's (it may be a downloaded model),
//   so the patterns do not apply there. The lock file of the running command stays.
// Anything else refuses the whole overwrite before anything is removed: Error(io,
// "ForeignEntry") naming the entry. Symbolic links are removed as links, never followed.
#pragma once


#include <array>
#include <filesystem>
#include <set>
#include <string>

namespace moequant {

// The model side files the output formats copy next to the weights (each format a subset).
inline constexpr std::array<const char*, 6> copied_side_files = {
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
    "chat_template.jinja"};

// Whose files an overwrite may remove besides the tool's partials.
struct OverwriteScope {
    bool conversion_output = false;  // the folder holds a run manifest: the conversion patterns apply
    std::set<std::string> names;     // top-level file names the caller wrote (a manifest's, synth's)
};

// Empties `dir` of what `scope` allows, after checking that it holds nothing else.
void clear_for_overwrite(const std::filesystem::path& dir, const OverwriteScope& scope);

}  // namespace moequant
