// --dry-run of convert and gptq: what the job would write, and whether it fits, printed before
// (and instead of) any work. Nothing is written.
#pragma once

#include <moequant/engine/conversion.hpp>

namespace moequant::cli {

// Prints the plan (family, MoE layers, experts, method, format), every output file with its
// size, the total and the free space at the output, and returns 0; Error(io, "NotEnoughDisk")
// (exit 5) after the listing when the output would not fit. The job is validated exactly as a
// real run validates it.
int report_dry_run(const ConversionJob& job, const std::string& method);

}  // namespace moequant::cli
