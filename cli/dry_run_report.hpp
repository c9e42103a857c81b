// --dry-run of convert, gptq and eval: what the job would write, whether it fits, its peak
// memory and its time, printed before (and instead of) any work. Nothing is written.
#pragma once

#include <moequant/engine/conversion.hpp>
#include <moequant/engine/evaluation.hpp>

namespace moequant::cli {

// Prints the plan (family, MoE layers, experts, method, format), every output file with its
// size, the total and the free space at the output, the room the run's scratch files need
// (`scratch_bytes`, when it has any), the estimated peak memory and time, and returns 0;
// Error(io, "NotEnoughDisk") or Error(io, "NoScratchSpace") (exit 5) after everything when the
// output or the scratch files would not fit. The job is validated exactly as a real run
// validates it.
int report_dry_run(const ConversionJob& job, const std::string& method, std::uint64_t scratch_bytes = 0);

// eval's: the plan (layers, experts, tokens, what is compared), the peak memory and the time.
int report_eval_dry_run(const EvaluationJob& job, const std::string& what);

}  // namespace moequant::cli
