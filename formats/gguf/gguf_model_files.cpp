#include "gguf_model_files.hpp"

#include "gguf_plan.hpp"

#include <moequant/error.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

namespace moequant::formats {
namespace {

namespace fs = std::filesystem;

// "PREFIX-00001-of-00003.gguf" -> {PREFIX, 1, 3}: llama-gguf-split's part names (llama_split_path).
struct SplitName {
    std::string prefix;
    unsigned long index = 0, count = 0;
};
std::optional<SplitName> split_name(const std::string& name) {
    constexpr std::size_t tail = 20;  // "-00001-of-00003.gguf"
    if (name.size() <= tail) return std::nullopt;
    const std::string end = name.substr(name.size() - tail);
    unsigned long k = 0, n = 0;
    char extra = 0;
    if (std::sscanf(end.c_str(), "-%5lu-of-%5lu.gguf%c", &k, &n, &extra) != 2 || k < 1 || n < 1 || k > n || n >= 100000) return std::nullopt;
    char canonical[32];
    std::snprintf(canonical, sizeof canonical, "-%05lu-of-%05lu.gguf", k, n);
    if (end != canonical) return std::nullopt;
    return SplitName{name.substr(0, name.size() - tail), k, n};
}

std::string part_name(const std::string& prefix, std::size_t index, std::size_t count) {
    char tail[32];
    std::snprintf(tail, sizeof tail, "-%05zu-of-%05zu.gguf", index + 1, count);
    return prefix + tail;
}

// The files of the model a first part or single file names: its split siblings, or itself.
std::vector<fs::path> model_files(const fs::path& first) {
    const auto split = split_name(first.filename().string());
    if (!split) return {first};
    std::vector<fs::path> files;
    for (std::size_t i = 0; i < split->count; ++i) files.push_back(first.parent_path() / part_name(split->prefix, i, split->count));
    return files;
}

}  // namespace

std::vector<fs::path> gguf_model_files(const fs::path& path) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
        const std::string name = path.filename().string();
        if (name.size() < 5 || name.compare(name.size() - 5, 5, ".gguf") != 0) return {};
        if (const auto split = split_name(name); split && split->index != 1)
            throw Error(ErrorKind::input, "is part " + std::to_string(split->index) + " of " + std::to_string(split->count) + " of a split GGUF",
                        {.file = path.string(), .code = "NotFirstPart", .hint = "give the first part, " + part_name(split->prefix, 0, split->count)});
        return model_files(path);
    }
    // moequant's own names first; a folder of its output also holds the run manifest.
    std::size_t count = 0;
    std::vector<fs::path> firsts;  // the first parts and single files of any name
    for (const auto& entry : fs::directory_iterator(path, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.size() < 5 || name.compare(name.size() - 5, 5, ".gguf") != 0 || !entry.is_regular_file(ec)) continue;
        const auto split = split_name(name);
        if (split && split->prefix == "model" && split->index == 1) count = split->count;
        if (!split || split->index == 1) firsts.push_back(entry.path());
    }
    if (count > 0) return model_files(path / gguf_split_name(0, count));
    if (fs::is_regular_file(path / gguf_single_file_name, ec)) return {path / gguf_single_file_name};
    if (firsts.empty()) return {};
    if (firsts.size() > 1) {
        std::sort(firsts.begin(), firsts.end());
        std::string names;
        for (std::size_t i = 0; i < firsts.size() && i < 4; ++i) names += (i ? ", " : "") + firsts[i].filename().string();
        throw Error(ErrorKind::input, "holds " + std::to_string(firsts.size()) + " GGUF models (" + names + (firsts.size() > 4 ? ", ..." : "") + ")",
                    {.file = path.string(), .code = "AmbiguousOutput", .hint = "give the file of the one to read (the first part of a split one)"});
    }
    return model_files(firsts.front());
}

}  // namespace moequant::formats
