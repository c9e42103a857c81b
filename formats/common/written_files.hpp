// Reporting what a format wrote (for the run manifest) and copying the model's side files.
// Header-only, shared by the format modules.
#pragma once

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

// The copies copy_side_files() makes, sized from the source files (--dry-run).
inline void plan_side_files(const std::filesystem::path& from, std::initializer_list<const char*> names,
                            std::vector<PlannedFile>& planned) {
    for (const char* name : names)
        if (std::filesystem::exists(from / name)) {
            require_regular_file(from / name);  // the copy would refuse it too (NotARegularFile)
            planned.push_back({name, std::filesystem::file_size(from / name)});
        }
}

// Copies each of `names` that exists in `from` into `to`, recording it in `written`.
inline void copy_side_files(const std::filesystem::path& from, const std::filesystem::path& to,
                            std::initializer_list<const char*> names, std::vector<WrittenFile>& written) {
    for (const char* name : names)
        if (std::filesystem::exists(from / name)) {
            copy_file_atomically(from / name, to / name);
            written.push_back(describe_written(to, name));
        }
}

}  // namespace moequant::formats
