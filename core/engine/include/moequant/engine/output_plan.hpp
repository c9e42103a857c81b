// What a conversion will write, before it writes anything: every file of the output with its
// size (the format's planned_files(), exact) and the run manifest (estimated: the calibration
// counts it records are known only after the run). --dry-run prints it; every real run checks
// first that it fits on the output's file system.
#pragma once

#include <moequant/engine/conversion.hpp>
#include <moequant/output_file.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace moequant {

struct OutputPlan {
    std::vector<PlannedFile> files;  // the format's files, exact sizes
    PlannedFile manifest;            // moequant-run.json, estimated
    std::uint64_t total_bytes() const noexcept;
};

// Validates the job as run_conversion() does (the same errors), then asks the format; nullopt
// when the format cannot say. Touches no file.
std::optional<OutputPlan> plan_output(const ConversionJob& job);

// Bytes an unprivileged writer may still use on the file system of `output` (or of its nearest
// existing parent folder), or the answer a test injected (seams/engine_faults.hpp).
std::uint64_t free_bytes_at(const std::filesystem::path& output);

// What the plan still has to write into `output`: each planned file's size beyond that of a
// file of the same name already there (a resumed run keeps its completed layers).
std::uint64_t bytes_to_write(const OutputPlan& plan, const std::filesystem::path& output);

// Error(io, "NotEnoughDisk", exit 5) naming the output folder when bytes_to_write() exceeds
// free_bytes_at().
void check_free_disk(const OutputPlan& plan, const std::filesystem::path& output);

}  // namespace moequant
