#include "conversion_run.hpp"

#include "calibration_coverage_note.hpp"
#include "cluster_run.hpp"
#include "dry_run_report.hpp"
#include "human_format.hpp"

#include <moequant/engine/cluster.hpp>
#include <moequant/engine/profiler.hpp>
#include <moequant/output_file.hpp>
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

namespace {

// The tables on stdout (unless --quiet) and the trace into the finished output, by rank 0: the
// events of this process (each rank profiles its own).
void write_profile(const std::vector<ProfileEvent>& events, double seconds, const std::filesystem::path& output, bool quiet) {
    if (!Cluster::world().root()) return;
    write_file_atomically(output / profile_trace_name, chrome_trace_json(events));
    if (quiet) return;
    print_profile_tables(events, seconds, std::cout);
    std::cout << "profile: " << events.size() << " events written to " << printable_name((output / profile_trace_name).string())
              << " (Chrome trace: chrome://tracing or ui.perfetto.dev)\n";
}

}  // namespace

int run_conversion_command(const ConversionRun& run) {
    ConversionJob& job = run.job;
    SaturatedRowLog saturated;
    job.saturated_rows = &saturated;
    if (run.request.dry_run) return report_dry_run(job, run.method, run.calibration ? run.calibration->scratch_bytes_needed() : 0);

    StreamProgress progress(stderr);
    SilentProgress silent;
    ProgressSink& sink = run.request.quiet || !Cluster::world().root() ? static_cast<ProgressSink&>(silent) : progress;
    run.notes(sink);
    if (run.calibration) run.calibration->describe(sink, *job.plan);
    job.cluster = &Cluster::world();
    if (run.profile) start_profiling();
    const ConversionResult result = run_conversion(job, sink);
    if (run.profile) write_profile(stop_profiling(), result.seconds, job.output, run.request.quiet);
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
