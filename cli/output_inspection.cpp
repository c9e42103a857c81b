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

}  // namespace

void inspect_converted_output(const Registry& registry, const fs::path& directory, bool as_json) {
    const OpenedOutput output = open_converted_output(registry, directory);
    const std::vector<FileRow> files = folder_files(directory);
    const std::vector<StoredPartKey> parts = output.reader->parts();
    std::set<std::int64_t> layers, experts;
    for (const auto& k : parts) {
        layers.insert(k.layer);
        experts.insert(k.expert);
    }
    const auto manifest = RunManifest::load(directory);
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
