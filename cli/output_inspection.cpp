#include "output_inspection.hpp"

#include "human_format.hpp"

#include <moequant/engine/run_manifest.hpp>
#include <moequant/engine/verification.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <iostream>
#include <set>

namespace moequant::cli {

namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

struct FileRow {
    std::string name;
    std::uint64_t bytes = 0;
};

std::vector<FileRow> folder_files(const fs::path& directory) {
    std::vector<FileRow> rows;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(directory, ec))
        if (entry.is_regular_file(ec)) rows.push_back({entry.path().filename().string(), entry.file_size(ec)});
    std::sort(rows.begin(), rows.end(), [](const FileRow& a, const FileRow& b) { return a.name < b.name; });
    return rows;
}

// A file given by name (a .gguf model): itself, and for the first of llama-gguf-split's parts
// (PREFIX-00001-of-0000N.gguf) its siblings PREFIX-0000K-of-0000N.gguf.
std::vector<FileRow> model_files(const fs::path& file) {
    const std::string name = file.filename().string();
    const std::size_t marker = name.rfind("-00001-of-");
    if (marker == std::string::npos || marker + 20 != name.size()) {
        std::error_code ec;
        return {{name, fs::file_size(file, ec)}};
    }
    const std::string prefix = name.substr(0, marker + 1), count = name.substr(marker + 6);  // "of-0000N.gguf"
    std::vector<FileRow> rows;
    for (FileRow& row : folder_files(file.parent_path()))
        if (row.name.size() == name.size() && row.name.starts_with(prefix) && row.name.ends_with(count)) rows.push_back(std::move(row));
    return rows;
}

}  // namespace

void inspect_converted_output(const Registry& registry, const fs::path& directory, bool as_json) {
    const OpenedOutput output = open_converted_output(registry, directory);
    std::error_code ec;
    const bool file = fs::is_regular_file(directory, ec);
    const std::vector<FileRow> files = file ? model_files(directory) : folder_files(directory);
    const std::vector<StoredPartKey> parts = output.reader->parts();
    std::set<std::int64_t> layers, experts;
    for (const auto& k : parts) {
        layers.insert(k.layer);
        experts.insert(k.expert);
    }
    const auto manifest = file ? std::nullopt : RunManifest::load(directory);
    const Options recorded_facts = output.reader->recorded();  // items() refers into it
    std::uint64_t total = 0;
    for (const auto& f : files) total += f.bytes;
    std::vector<std::string> checks;
    for (const auto& c : output.format->runtime_checks()) checks.push_back(c.name);

    if (as_json) {
        json::object o{{"path", directory.string()}, {"converted_output", true}, {"format", std::string(output.format->id())},
                       {"bytes", total}, {"stored_parts", parts.size()}, {"layers", layers.size()}, {"experts", experts.size()}};
        json::array f;
        for (const auto& row : files) f.push_back(json::object{{"name", row.name}, {"bytes", row.bytes}});
        o["files"] = std::move(f);
        json::object recorded;
        for (const auto& [k, v] : recorded_facts.items()) recorded[k] = v;
        o["recorded"] = std::move(recorded);
        if (manifest) {
            json::object settings;
            for (const auto& [k, v] : manifest->settings) settings[k] = v;
            o["manifest"] = json::object{{"command", manifest->command}, {"complete", manifest->complete}, {"settings", std::move(settings)}};
        }
        o["runtime_checks"] = json::array(checks.begin(), checks.end());
        std::cout << json::serialize(o) << "\n";
        return;
    }
    std::cout << "converted output: " << output.format->id() << " (" << output.format->description() << ")\n";
    std::cout << "files: " << files.size() << ", " << human_bytes(total) << "\n";
    for (const auto& row : files) std::cout << "  " << row.name << "  " << human_bytes(row.bytes) << "\n";
    std::cout << "stored expert matrices: " << parts.size() << " (" << layers.size() << " MoE layer(s), " << experts.size()
              << " expert(s) each)\n";
    std::cout << "recorded:\n";
    for (const auto& [k, v] : recorded_facts.items()) std::cout << "  " << k << ": " << v << "\n";
    if (manifest) {
        std::cout << "run manifest: moequant " << manifest->command << (manifest->complete ? ", complete" : ", unfinished") << "\n";
        for (const auto& [k, v] : manifest->settings) std::cout << "  " << k << ": " << v << "\n";
    }
    if (!checks.empty()) {
        std::cout << "runtime checks:";
        for (const auto& c : checks) std::cout << " " << c << " (verify --for " << c << ")";
        std::cout << "\n";
    }
}

}  // namespace moequant::cli
