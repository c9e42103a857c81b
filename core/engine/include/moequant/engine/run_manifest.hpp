// moequant-run.json: what a conversion did, so a rerun (or --resume-layer) can continue where
// an interrupted run stopped and refuse a folder that holds another run's output
// (conventions.md §4). It records the tool version, the settings that decide the output bytes,
// a fingerprint of the source, a digest of the plan, and every completed layer with the
// digests of the files written, and each source shard's size, modification time and header
// digest, so a rerun adopts a completed layer only while its files and the shards feeding it are
// unchanged. No absolute paths and no clock times of the run: the same inputs give the same
// manifest.
#pragma once

#include <moequant/checkpoint.hpp>
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

// A source shard as it was when the run started.
struct ManifestShard {
    std::string name;
    std::uint64_t bytes = 0;
    std::int64_t mtime_ns = 0;
    std::string header_digest;
    bool operator==(const ManifestShard&) const = default;
};

// How many calibration tokens each routed expert of a calibrated layer was quantized on
// (issue 17's coverage report): every selected token of the layer, or with routed-only
// calibration the tokens routed to it; an expert none was routed to is calibrated on all
// tokens instead and listed in `fallback_experts`.
struct LayerCoverage {
    std::int64_t tokens = 0;         // the layer's calibration tokens
    bool routed_only = false;
    std::vector<std::int64_t> tokens_per_expert;  // by the plan's expert order (expert ids)
    std::vector<std::int64_t> experts;            // the expert ids, same order
    std::vector<std::int64_t> fallback_experts;   // routed none: calibrated on all tokens
    bool operator==(const LayerCoverage&) const = default;
};

struct ManifestLayer {
    std::int64_t layer = 0;
    std::vector<ManifestFile> files;
    std::optional<LayerCoverage> coverage;  // calibrated conversions only
    // combined_digest() of the stored tensors the layer's experts were made of (source_reads.hpp):
    // a rerun keeps the layer only while the source still holds those bytes. Empty in manifests
    // of runs before it was recorded (their layers are converted again).
    std::string source_digest;
};

struct RunManifest {
    std::string tool_version;
    std::string command;  // e.g. "convert"
    std::vector<std::pair<std::string, std::string>> settings;  // what decides the bytes
    std::string source_fingerprint;  // config.json and the shard names: which model
    std::string plan_digest;
    std::vector<ManifestShard> source_shards;  // in the checkpoint's order
    std::vector<ManifestLayer> completed_layers;  // in completion order
    std::vector<ManifestFile> final_files;        // written by the last step
    bool complete = false;

    // nullopt when the folder has no manifest; Error(input) when it is unreadable.
    static std::optional<RunManifest> load(const std::filesystem::path& directory);
    // Writes text() atomically (temporary name, then rename).
    void save(const std::filesystem::path& directory) const;
    // The file's content.
    std::string text() const;

    const ManifestLayer* completed(std::int64_t layer) const noexcept;
    // True when both were made from the same source, plan and settings (a shard whose data
    // changed since does not make another job: only the layers it feeds are redone).
    bool same_job(const RunManifest& other) const noexcept;
    // The recorded state of a source shard, or null when this manifest has none.
    const ManifestShard* source_shard(const std::string& name) const noexcept;
};

// Digest of config.json and the shard names (which model, not the state of its data).
std::string source_fingerprint(const Checkpoint& checkpoint);
// Each shard's size, modification time and header digest now (reads headers only).
std::vector<ManifestShard> source_shard_records(const Checkpoint& checkpoint);
// Digest of everything in a plan.
std::string plan_digest(const ModelPlan& plan, const Checkpoint& source);
// A manifest naming only which source and plan (version, fingerprint, shard records, plan
// digest): what a job description starts from.
RunManifest describe_source(const Checkpoint& source, const ModelPlan& plan);

}  // namespace moequant
