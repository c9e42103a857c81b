#include <moequant/engine/output_lock.hpp>
#include <moequant/engine/output_overwrite.hpp>
#include <moequant/engine/profiler.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/error.hpp>
#include <moequant/output_file.hpp>

#include <algorithm>
#include <cctype>
#include <vector>

namespace moequant {

namespace fs = std::filesystem;

namespace {

// "<prefix><digits>"
bool numbered(const std::string& name, std::string_view prefix) {
    if (!name.starts_with(prefix) || name.size() == prefix.size()) return false;
    return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

// A kt tree layer as the tool writes it: _numa_M folders of .kt files (and partials), nothing else.
bool is_kt_layer_tree(const fs::path& layer) {
    std::error_code ec;
    for (fs::directory_iterator numa(layer, ec), end; !ec && numa != end; numa.increment(ec)) {
        const std::string name = numa->path().filename().string();
        if (is_partial_name(name)) continue;
        if (!numbered(name, "_numa_") || !numa->is_directory(ec) || numa->is_symlink(ec)) return false;
        for (fs::directory_iterator f(numa->path(), ec); !ec && f != end; f.increment(ec)) {
            const std::string file = f->path().filename().string();
            if (is_partial_name(file)) continue;
            if (!file.ends_with(".kt") || !f->is_regular_file(ec) || f->is_symlink(ec)) return false;
        }
    }
    return !ec;
}

// True when a conversion writes an entry of this name (and kind) at the top of its output.
bool is_conversion_output_entry(const fs::directory_entry& entry) {
    const std::string name = entry.path().filename().string();
    std::error_code ec;
    const bool link = entry.is_symlink(ec);
    const bool file = !link && entry.is_regular_file(ec);
    const bool folder = !link && entry.is_directory(ec);
    if (is_partial_name(name)) return true;  // the tool's own temporaries, of any kind
    if (link) return name.ends_with(".safetensors");  // a planted link loses its name, nothing more
    if (folder) return numbered(name, "_layer_") && is_kt_layer_tree(entry.path());
    if (!file) return false;
    if (name == run_manifest_name || name == profile_trace_name || name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json")) return true;
    return std::find(copied_side_files.begin(), copied_side_files.end(), name) != copied_side_files.end();
}

}  // namespace

void clear_for_overwrite(const fs::path& dir, const OverwriteScope& scope) {
    std::vector<fs::path> remove;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name == output_lock_name) continue;  // held by this run
        std::error_code kind_ec;
        const bool owned_file = scope.names.count(name) && (it->is_symlink(kind_ec) || !it->is_directory(kind_ec));
        const bool owned = owned_file || is_partial_name(name) || (scope.conversion_output && is_conversion_output_entry(*it));
        if (!owned)
            throw Error(ErrorKind::io,
                        std::string("--overwrite removes only what moequant wrote, and the output folder also holds '") + name +
                            "'" + (scope.conversion_output ? "" : " (the folder holds no moequant-run.json)"),
                        {.file = it->path().string(),
                         .code = "ForeignEntry",
                         .hint = "move it away, or choose another output folder"});
        remove.push_back(it->path());
    }
    if (ec)
        throw Error(ErrorKind::io, "cannot list the output folder: " + ec.message(), {.file = dir.string(), .code = "WriteFailed"});
    for (const auto& path : remove) {
        fs::remove_all(path, ec);  // a symlink itself, never its target
        if (ec)
            throw Error(ErrorKind::io, "cannot clear the output folder for --overwrite: " + ec.message(),
                        {.file = path.string(), .code = "WriteFailed"});
    }
}

}  // namespace moequant
