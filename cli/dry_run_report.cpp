#include "dry_run_report.hpp"
#include "human_format.hpp"
#include "scratch_folder.hpp"

#include <moequant/engine/output_plan.hpp>
#include <moequant/engine/run_estimate.hpp>
#include <moequant/printable.hpp>

#include <moequant/parallel.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>

namespace moequant::cli {

namespace {

// "1-3, 5" for the MoE layers of a plan.
std::string layer_ranges(const ModelPlan& plan) {
    std::string out;
    const auto& layers = plan.moe_layers;
    for (std::size_t i = 0; i < layers.size();) {
        std::size_t j = i;
        while (j + 1 < layers.size() && layers[j + 1].layer == layers[j].layer + 1) ++j;
        out += (out.empty() ? "" : ", ") + std::to_string(layers[i].layer);
        if (j > i) out += "-" + std::to_string(layers[j].layer);
        i = j + 1;
    }
    return out;
}

std::string duration_text(double seconds) {
    const auto s = static_cast<std::int64_t>(std::llround(seconds));
    if (s < 1) return "under a second";
    if (s < 120) return std::to_string(s) + " s";
    if (s < 7200) return std::to_string((s + 30) / 60) + " min";
    const std::int64_t hours = s / 3600, minutes = (s % 3600) / 60;
    return std::to_string(hours) + " h " + std::to_string(minutes) + " min";
}

// "peak memory: about ..." with its terms, and "time: about ..." with what it was scaled from.
void print_estimate(const RunEstimate& e, std::uint64_t bytes_written) {
    if (e.memory.empty()) return;
    const std::uint64_t peak = e.peak_bytes();
    std::cout << "peak memory: about " << with_commas(peak) << " bytes (" << human_bytes(peak) << ")"
              << (e.exact ? "" : ", a lower bound (the probes' peaks could not be measured here)") << ":\n";
    for (const MemoryTerm& t : e.memory) std::cout << "  " << human_bytes(t.bytes) << "  " << t.what << "\n";
    std::cout << "time: about " << duration_text(e.seconds) << " of computing on " << max_threads() << " thread(s), scaled from "
              << e.timed << " measured now; reading " << human_bytes(e.bytes_read);
    if (bytes_written > 0) std::cout << " and writing " << human_bytes(bytes_written);
    std::cout << " come on top, at the disks' speed\n";
}

}  // namespace

int report_eval_dry_run(const EvaluationJob& job, const std::string& what) {
    std::int64_t tokens = 0;
    for (const auto& s : job.samples) tokens += static_cast<std::int64_t>(s.size());
    std::cout << "dry run: nothing is run\n"
              << "plan: " << what << "; " << job.plan->num_hidden_layers << " layers (" << job.plan->moe_layers.size()
              << " MoE, " << layer_ranges(*job.plan) << ") on " << job.samples.size() << " sample(s), " << tokens << " tokens\n";
    print_estimate(estimate_evaluation(job), 0);
    return 0;
}

int report_dry_run(const ConversionJob& job, const std::string& method, std::uint64_t scratch_bytes) {
    const std::optional<OutputPlan> plan = plan_output(job);
    const ModelPlan& m = *job.plan;
    std::cout << "dry run: nothing is written\n"
              << "plan: " << m.family << ", " << m.moe_layers.size() << " MoE layer(s) (" << layer_ranges(m) << ") x "
              << m.num_experts << " routed experts, " << method << " into " << job.format->id();
    if (job.parts > 1) std::cout << ", " << job.parts << " threadpool parts";
    if (!job.unquantized_layers.empty()) std::cout << ", " << job.unquantized_layers.size() << " layer(s) kept unquantized";
    std::cout << "\n";
    if (!plan) {
        std::cout << "sizes: format '" << job.format->id() << "' does not predict its files\n";
        print_estimate(estimate_conversion(job), 0);
        return 0;
    }
    std::size_t width = 0, digits = 0;
    for (const auto& f : plan->files) {
        width = std::max(width, printable_name(f.name).size());
        digits = std::max(digits, with_commas(f.bytes).size());
    }
    std::cout << "files in " << printable_name(job.output.string()) << ":\n";
    auto line = [&](const PlannedFile& f, const char* note) {
        const std::string name = printable_name(f.name), bytes = with_commas(f.bytes);
        std::cout << "  " << name << std::string(width + 2 - std::min(width, name.size()), ' ')
                  << std::string(digits - std::min(digits, bytes.size()), ' ') << bytes << " bytes" << note << "\n";
    };
    std::size_t staged = 0;
    for (const auto& f : plan->files) {
        line(f, f.staged ? "  (staged: removed at the end)" : "");
        staged += f.staged;
    }
    line(plan->manifest, "  (about: the run's record)");
    const std::uint64_t total = plan->total_bytes(), need = bytes_to_write(*plan, job.output), free = free_bytes_at(job.output);
    std::cout << "total: " << with_commas(total) << " bytes (" << human_bytes(total) << ") in " << plan->files.size() + 1
              << " files";
    if (staged > 0) std::cout << " at the peak (" << staged << " of them staged)";
    if (need != total) std::cout << ", " << with_commas(need) << " of them still to write";
    std::cout << "\nfree at the output: " << with_commas(free) << " bytes (" << human_bytes(free) << "): "
              << (need <= free ? "fits" : "does not fit") << "\n";
    std::uint64_t scratch_free = UINT64_MAX;
    if (scratch_bytes > 0) {  // the run's per-layer inputs, written under $TMPDIR
        const std::filesystem::path folder = checked_temporary_folder(0);
        scratch_free = free_bytes_at(folder);
        std::cout << "scratch files in " << printable_name(folder.string()) << ": " << human_bytes(scratch_bytes)
                  << " at most, " << human_bytes(scratch_free) << " free: " << (scratch_bytes <= scratch_free ? "fits" : "does not fit")
                  << "\n";
    }
    // The estimate first: a plan that does not fit is still worth its figures; then the refusal
    // the run would meet (exit 5).
    print_estimate(estimate_conversion(job), need);
    check_free_disk(*plan, job.output);
    if (scratch_bytes > scratch_free) (void)checked_temporary_folder(scratch_bytes);  // NoScratchSpace, as the run
    return 0;
}

}  // namespace moequant::cli
