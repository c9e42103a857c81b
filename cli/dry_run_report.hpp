// --dry-run of convert, gptq and eval: what the job would write, whether it fits, its peak
// memory and its time, printed before (and instead of) any work. Nothing is written.
#pragma once

#include <moequant/engine/conversion.hpp>
#include <moequant/engine/evaluation.hpp>

namespace moequant::cli {

// Prints the plan (family, MoE layers, experts, method, format), every output file with its
// size, the total and the free space at the output, the estimated peak memory and time, and
// returns 0; Error(io, "NotEnoughDisk") (exit 5) after the listing when the output would not
// fit. The job is validated exactly as a real run validates it.
int report_dry_run(const ConversionJob& job, const std::string& method);

// eval's: the plan (layers, experts, tokens, what is compared), the peak memory and the time.
int report_eval_dry_run(const EvaluationJob& job, const std::string& what);

}  // namespace moequant::cli
