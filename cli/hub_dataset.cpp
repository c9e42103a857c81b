#include "hub_dataset.hpp"

#include <moequant/error.hpp>
#include <moequant/input_file.hpp>

#include <cctype>
#include <cstdlib>
#include <optional>

namespace moequant::cli {

namespace fs = std::filesystem;

namespace {

bool hub_name_part(const std::string& part) {
    if (part.empty() || part.size() > 96 || part == "." || part.find("..") != std::string::npos) return false;
    for (char c : part)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
    return true;
}

const char* environment(const char* name) {
    const char* value = ::secure_getenv(name);
    return value && *value ? value : nullptr;
}

// The snapshot a cached repository's refs/main names, else its only snapshot.
std::optional<fs::path> cached_snapshot(const fs::path& repository) {
    std::error_code ec;
    const fs::path snapshots = repository / "snapshots";
    if (fs::is_regular_file(repository / "refs" / "main", ec)) {
        std::string commit = read_small_file(repository / "refs" / "main", 256);
        while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
        if (hub_name_part(commit) && fs::is_directory(snapshots / commit, ec)) return snapshots / commit;
    }
    std::optional<fs::path> only;
    for (const auto& entry : fs::directory_iterator(snapshots, ec)) {
        if (!entry.is_directory(ec)) continue;
        if (only) return std::nullopt;  // several and no ref: which one is not ours to guess
        only = entry.path();
    }
    return only;
}

bool holds_json_files(const fs::path& folder) {
    std::error_code ec;
    fs::recursive_directory_iterator it(folder, fs::directory_options::none, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const fs::path extension = it->path().extension();
        if ((extension == ".jsonl" || extension == ".json") && it->is_regular_file(ec)) return true;
    }
    return false;
}

}  // namespace

bool looks_like_hub_dataset_id(const std::string& value) {
    const std::size_t slash = value.find('/');
    if (slash == std::string::npos || value.find('/', slash + 1) != std::string::npos) return false;
    return hub_name_part(value.substr(0, slash)) && hub_name_part(value.substr(slash + 1));
}

fs::path hub_cache_folder() {
    if (const char* cache = environment("HF_HUB_CACHE")) return cache;
    if (const char* home = environment("HF_HOME")) return fs::path(home) / "hub";
    if (const char* xdg = environment("XDG_CACHE_HOME")) return fs::path(xdg) / "huggingface" / "hub";
    if (const char* home = environment("HOME")) return fs::path(home) / ".cache" / "huggingface" / "hub";
    return ".cache/huggingface/hub";
}

namespace {

// An "owner/name" that is no local path, and its repository folder in the cache.
std::optional<fs::path> hub_repository(const std::string& dataset) {
    std::error_code ec;
    if (!looks_like_hub_dataset_id(dataset) || fs::exists(fs::symlink_status(dataset, ec))) return std::nullopt;
    const std::size_t slash = dataset.find('/');
    return hub_cache_folder() / ("datasets--" + dataset.substr(0, slash) + "--" + dataset.substr(slash + 1));
}

}  // namespace

std::optional<fs::path> cached_hub_dataset(const std::string& dataset) {
    std::error_code ec;
    const std::optional<fs::path> repository = hub_repository(dataset);
    if (!repository || !fs::is_directory(*repository, ec)) return std::nullopt;
    std::optional<fs::path> snapshot = cached_snapshot(*repository);
    if (snapshot && !holds_json_files(*snapshot)) snapshot.reset();
    return snapshot;
}

fs::path dataset_path(const std::string& dataset, const std::string& split) {
    const std::optional<fs::path> repository = hub_repository(dataset);
    if (!repository) return dataset;
    std::error_code ec;
    const bool cached = fs::is_directory(*repository, ec);
    const std::optional<fs::path> snapshot = cached ? cached_snapshot(*repository) : std::nullopt;
    if (snapshot && holds_json_files(*snapshot)) return *snapshot;
    const std::string why =
        !cached     ? "is not in the local Hugging Face cache (" + hub_cache_folder().string() + ")"
        : !snapshot ? "has no single snapshot in the local Hugging Face cache (" + repository->string() + ")"
                    : "is in the local Hugging Face cache only in a form moequant does not read (no JSON/JSONL file in " +
                          snapshot->string() + ")";
    throw Error(ErrorKind::input, "--dataset " + dataset + " names a Hub dataset that " + why + "; moequant reads local data only",
                {.code = "DatasetNotLocal",
                 .hint = "export it once with python3 -c \"from datasets import load_dataset; load_dataset('" + dataset +
                         "', split='" + split + "').to_json('data/" + split + ".jsonl')\" and pass --dataset data"});
}

}  // namespace moequant::cli
