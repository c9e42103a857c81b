// Where a command may write. Checked on real paths (symlinks resolved) before anything is
// written or removed, so no spelling of a path — a symlink, "..", "~", "." — can turn an
// output onto the user's input or a folder that holds it (docs/safety.md, "Output folders").
//
// Every refusal is Error(io) (exit 5) naming both paths, with one of the codes
//   OutputIsInput        the output is one of the inputs
//   OutputContainsInput  an input lies inside the output folder
//   OutputInsideInput    the output lies inside an input model folder
//   UnsafeOverwrite      --overwrite of /, the home folder, or the current folder or one above it
//   OutputExists         a single-file output exists and --overwrite was not given
//   OutputNotAFile       a single-file output names a folder or a special file
#pragma once


#include <filesystem>
#include <vector>

namespace moequant {

// What a command reads: model folders (nothing may be written inside them) and single files.
struct CommandInputs {
    std::vector<std::filesystem::path> folders;
    std::vector<std::filesystem::path> files;
};

// The absolute path with every existing component's symlinks resolved ("/a/link/new" ->
// "/a/target/new"); the part that does not exist yet is kept as written, normalized.
std::filesystem::path resolved_path(const std::filesystem::path& path);

// True when `inner` is `outer` or lies below it (both resolved, compared by components).
bool path_is_within(const std::filesystem::path& inner, const std::filesystem::path& outer);

// An output folder (convert, gptq, synth): not an input, not holding one, not inside an input
// folder; with `overwrite` also not /, the home folder, or the current folder or any above it.
void check_output_folder(const std::filesystem::path& output, const CommandInputs& inputs, bool overwrite);

// A single-file output (record --output, plan --output, --activations, --save-activations):
// not an input, not inside an input folder, and replaced only with `overwrite` (when it is a
// regular file).
void check_output_file(const std::filesystem::path& output, const CommandInputs& inputs, bool overwrite);

}  // namespace moequant
