// The stderr line gptq prints after a calibrated run when routed-only calibration left experts
// without a single routed token (the run manifest records every expert's token count): printed
// even with --quiet, since it says something about the output, not about progress.
#pragma once

#include <filesystem>

namespace moequant::cli {

// "moequant: note: calibration coverage: ..." naming the layers and experts that fell back to
// all tokens; nothing when there are none or the output has no coverage record.
void note_calibration_fallbacks(const std::filesystem::path& output);

}  // namespace moequant::cli
