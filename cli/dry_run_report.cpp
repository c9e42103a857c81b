#include "dry_run_report.hpp"
#include "human_format.hpp"

#include <moequant/engine/output_plan.hpp>
#include <moequant/printable.hpp>

#include <algorithm>
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

}  // namespace

int report_dry_run(const ConversionJob& job, const std::string& method) {
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
    for (const auto& f : plan->files) line(f, "");
    line(plan->manifest, "  (about: the run's record)");
    const std::uint64_t total = plan->total_bytes(), need = bytes_to_write(*plan, job.output), free = free_bytes_at(job.output);
    std::cout << "total: " << with_commas(total) << " bytes (" << human_bytes(total) << ") in " << plan->files.size() + 1
              << " files";
    if (need != total) std::cout << ", " << with_commas(need) << " of them still to write";
    std::cout << "\nfree at the output: " << with_commas(free) << " bytes (" << human_bytes(free) << "): "
              << (need <= free ? "fits" : "does not fit") << "\n";
    check_free_disk(*plan, job.output);
    return 0;
}

}  // namespace moequant::cli
