#include "conversion/job_record.hpp"
#include "conversion/job_validation.hpp"
#include "seams/engine_faults.hpp"

#include <moequant/digest.hpp>
#include <moequant/engine/output_plan.hpp>
#include <moequant/engine/sequential_calibration.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/error.hpp>

#include <sys/statvfs.h>

#include <string>

namespace moequant {

namespace fs = std::filesystem;

namespace {

// The tokens each calibrated layer records per expert: every selected token (the most digits
// a routed-only run can need, so the estimate errs on the large side).
std::optional<std::int64_t> calibration_tokens(const ConversionJob& job, const Quantizer* quantizer) {
    if (!quantizer || (!quantizer->calibration() && !weighs_by_importance(*quantizer, *job.plan))) return std::nullopt;
    if (job.sequential) return job.sequential->tokens();
    if (job.calibration) return job.calibration->tokens();
    return std::nullopt;
}

// moequant-run.json as the finished run writes it: the job's record, every MoE layer with its
// calibration counts and source digest, and each file with its size and a digest of the fixed width they have.
PlannedFile estimated_manifest(const ConversionJob& job, const CheckedJob& checked, const std::vector<PlannedFile>& files) {
    const Quantizer* quantizer = checked.quantizer;
    RunManifest m = describe_job(job, checked.importance.get());
    const std::string digest(Digest64{}.hex().size(), '0');
    const auto tokens = calibration_tokens(job, quantizer);
    for (const auto& layer : job.plan->moe_layers) {
        ManifestLayer entry{layer.layer, {}, std::nullopt};
        entry.source_digest = digest;
        if (tokens && !job.unquantized_layers.count(layer.layer)) {
            LayerCoverage coverage;
            coverage.tokens = *tokens;
            coverage.routed_only = job.sequential ? job.sequential->routed_only() : job.calibration->routed_only();
            for (const auto& e : layer.experts) {
                coverage.experts.push_back(e.expert);
                coverage.tokens_per_expert.push_back(*tokens);
            }
            entry.coverage = std::move(coverage);
        }
        m.completed_layers.push_back(std::move(entry));
    }
    // Which list a file lands in does not change its entry's size.
    for (const PlannedFile& f : files)
        if (!f.staged) m.final_files.push_back({f.name, f.bytes, digest});
    m.complete = true;
    return {run_manifest_name, m.text().size()};
}

}  // namespace

std::uint64_t OutputPlan::total_bytes() const noexcept {
    std::uint64_t total = manifest.bytes;
    for (const PlannedFile& f : files) total += f.bytes;
    return total;
}

std::optional<OutputPlan> plan_output(const ConversionJob& job) { return plan_checked_output(job, validate_job(job)); }

std::optional<OutputPlan> plan_checked_output(const ConversionJob& job, const CheckedJob& checked) {
    std::optional<std::vector<PlannedFile>> files = job.format->planned_files(checked.context);
    if (!files) return std::nullopt;
    OutputPlan plan;
    plan.manifest = estimated_manifest(job, checked, *files);
    plan.files = std::move(*files);
    return plan;
}

std::uint64_t free_bytes_at(const fs::path& output) {
    if (const auto injected = seams::engine_faults().free_bytes) return *injected;
    std::error_code ec;
    fs::path at = fs::absolute(output, ec);
    while (!at.empty() && !fs::is_directory(at, ec) && at != at.parent_path()) at = at.parent_path();
    struct statvfs fs_info {};
    if (::statvfs(at.c_str(), &fs_info) != 0) return UINT64_MAX;  // cannot tell: the writes will say
    return static_cast<std::uint64_t>(fs_info.f_bavail) * fs_info.f_frsize;
}

std::uint64_t bytes_to_write(const OutputPlan& plan, const fs::path& output) {
    auto beyond_existing = [&](const PlannedFile& f) {
        std::error_code ec;
        const std::uint64_t existing = fs::file_size(output / f.name, ec);
        return ec || existing >= f.bytes ? (ec ? f.bytes : 0) : f.bytes - existing;
    };
    std::uint64_t need = beyond_existing(plan.manifest);
    for (const PlannedFile& f : plan.files) need += beyond_existing(f);
    return need;
}

void check_free_disk(const OutputPlan& plan, const fs::path& output) {
    const std::uint64_t need = bytes_to_write(plan, output), free = free_bytes_at(output);
    if (need <= free) return;
    throw Error(ErrorKind::io,
                "the output needs " + std::to_string(need) + " more bytes, but its file system has " + std::to_string(free) +
                    " free",
                {.file = output.string(), .code = "NotEnoughDisk",
                 .hint = "free some space or choose another output folder (--dry-run lists every file)"});
}

}  // namespace moequant
