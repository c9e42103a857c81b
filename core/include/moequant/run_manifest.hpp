// moequant-run.json: what a conversion did, so a rerun (or --resume-layer) can continue where
// an interrupted run stopped and refuse a folder that holds another run's output
// (conventions.md §4). It records the tool version, the settings that decide the output bytes,
// a fingerprint of the source, a digest of the plan, and every completed layer with the
// digests of the files written. No absolute paths, no times: the same inputs give the same
// manifest.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/export.hpp>
#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moequant {

inline constexpr const char* run_manifest_name = "moequant-run.json";

struct ManifestFile {
    std::string name;  // relative to the output folder
    std::uint64_t bytes = 0;
    std::string digest;
};

struct ManifestLayer {
    std::int64_t layer = 0;
    std::vector<ManifestFile> files;
};

struct MOEQUANT_API RunManifest {
    std::string tool_version;
    std::string command;  // e.g. "convert"
    std::vector<std::pair<std::string, std::string>> settings;  // what decides the bytes
    std::string source_fingerprint;
    std::string plan_digest;
    std::vector<ManifestLayer> completed_layers;  // in completion order
    std::vector<ManifestFile> final_files;        // written by the last step
    bool complete = false;

    // nullopt when the folder has no manifest; Error(input) when it is unreadable.
    static std::optional<RunManifest> load(const std::filesystem::path& directory);
    // Writes it atomically (temporary name, then rename).
    void save(const std::filesystem::path& directory) const;

    const ManifestLayer* completed(std::int64_t layer) const noexcept;
    // True when both were made from the same source, plan and settings.
    bool same_job(const RunManifest& other) const noexcept;
};

// Digest of config.json and every shard's name, size and header (reads headers only).
MOEQUANT_API std::string source_fingerprint(const Checkpoint& checkpoint);
// Digest of everything in a plan.
MOEQUANT_API std::string plan_digest(const ModelPlan& plan);

}  // namespace moequant
