#include "conversion_run.hpp"

#include "calibration_coverage_note.hpp"
#include "cluster_run.hpp"
#include "dry_run_report.hpp"
#include "human_format.hpp"

#include <moequant/engine/cluster.hpp>
#include <moequant/printable.hpp>

#include <iostream>

namespace moequant::cli {

ConversionJob conversion_job(const char* command, const ConversionRequest& request, const PlannedSource& source,
                             const Quantizer* quantizer, const OutputFormat* format) {
    ConversionJob job;
    job.command = command;
    job.source = &source.checkpoint;
    job.config = &source.config;
    job.plan = &source.plan;
    job.quantizer = quantizer;
    job.format = format;
    job.output = request.output;
    if (request.resume_layer >= 0) job.resume_layer = request.resume_layer;
    job.overwrite = request.overwrite;
    job.allow_non_finite = request.allow_non_finite;
    return job;
}

int run_conversion_command(const ConversionRun& run) {
    ConversionJob& job = run.job;
    SaturatedRowLog saturated;
    job.saturated_rows = &saturated;
    if (run.request.dry_run) return report_dry_run(job, run.method);

    StreamProgress progress(stderr);
    SilentProgress silent;
    ProgressSink& sink = run.request.quiet || !Cluster::world().root() ? static_cast<ProgressSink&>(silent) : progress;
    run.notes(sink);
    if (run.calibration) run.calibration->describe(sink, *job.plan);
    job.cluster = &Cluster::world();
    const ConversionResult result = run_conversion(job, sink);
    if (run.calibration) run.calibration->finish();  // commits --save-activations
    warn_about_saturated_rows_of_every_rank(saturated);
    note_calibration_coverage(job.output, run.request.quiet);
    std::cout << run.done << " " << result.layers_written << " layer(s)";
    if (result.layers_adopted) std::cout << ", kept " << result.layers_adopted << " completed earlier";
    std::cout << " of " << job.plan->family << " with " << run.method << " into " << job.format->id() << " ("
              << printable_name(job.output.string()) << "): " << human_bytes(result.input_bytes) << " of experts in, "
              << human_bytes(result.output_bytes) << " written, " << result.seconds << " s" << cluster_traffic(result) << "\n";
    return 0;
}

}  // namespace moequant::cli
