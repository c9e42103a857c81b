// What convert and gptq share: the part of their command lines that asks for the same things,
// the job fields those fill alike, and the run once the job is built: --dry-run's report
// instead of any work, or the conversion across the cluster's ranks with its progress, the
// calibration's note and commit, the saturated-row and coverage warnings, and the summary line.
#pragma once

#include "calibration_inputs.hpp"
#include "family_selection.hpp"

#include <moequant/engine/conversion.hpp>
#include <moequant/engine/progress.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace moequant::cli {

// The options both commands take (each with its own flag names and help).
struct ConversionRequest {
    std::string input, output, family;
    std::size_t threads = 0;
    std::int64_t resume_layer = -1;
    bool overwrite = false, allow_non_finite = false, dry_run = false, quiet = false;
    CalibrationInputOptions data;
    double dampening = 0.1;
};

// A job for `command` ("convert", "gptq": the run manifest records it) reading `source` with the
// plugins given, its output, resume and safety choices taken from `request`.
ConversionJob conversion_job(const char* command, const ConversionRequest& request, const PlannedSource& source,
                             const Quantizer* quantizer, const OutputFormat* format);

struct ConversionRun {
    ConversionJob& job;                        // complete but for the saturated-row log and the cluster
    const ConversionRequest& request;          // --dry-run, --quiet
    std::string method;                        // what the dry run and the summary name: "amx-int4", "gptq W4A16 group 128"
    const char* done;                          // the summary's first word: "converted", "quantized"
    CalibrationInputs* calibration = nullptr;  // attached to the job already; null without calibration
    // convert --profile: the run's steps timed, printed as two tables and written as a Chrome
    // trace, <output>/profile_trace.json (kt-kernel's converter writes its torch profile there).
    bool profile = false;
    // The command's own notes and warnings before the run (after the progress sink is chosen).
    std::function<void(ProgressSink&)> notes = [](ProgressSink&) {};
};

// Runs it; returns the exit code (report_dry_run's with --dry-run, else 0).
int run_conversion_command(const ConversionRun& run);

}  // namespace moequant::cli
