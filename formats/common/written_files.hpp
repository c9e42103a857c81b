// Reporting what a format wrote (for the run manifest) and copying the model's side files.
// Header-only, shared by the format modules.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/digest.hpp>
#include <moequant/input_file.hpp>
#include <moequant/output_file.hpp>
#include <moequant/output_format.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace moequant::formats {

inline WrittenFile describe_written(const std::filesystem::path& dir, const std::string& name) {
    return {name, std::filesystem::file_size(dir / name), file_digest(dir / name)};
}

// The copies copy_side_files() makes, sized from the source's side files (--dry-run).
inline void plan_side_files(const Checkpoint& source, std::initializer_list<const char*> names, std::vector<PlannedFile>& planned) {
    for (const char* name : names)
        if (auto content = source.side_file(name)) planned.push_back({name, content->size()});
}

// Copies each of `names` the source has (its folder's file, or the one its reader rebuilt from a
// GGUF's metadata) into `to`, recording it in `written`.
inline void copy_side_files(const Checkpoint& source, const std::filesystem::path& to, std::initializer_list<const char*> names,
                            std::vector<WrittenFile>& written) {
    for (const char* name : names)
        if (auto content = source.side_file(name)) {
            write_file_atomically(to / name, *content);
            written.push_back(describe_written(to, name));
        }
}

}  // namespace moequant::formats
