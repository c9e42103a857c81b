// The stderr lines gptq and convert --calibrate print after a calibrated run about how many
// calibration tokens each expert was quantized on (the run manifest records every expert's
// count): a summary, and the experts routed-only calibration left without a single routed
// token, which were calibrated on all tokens instead. The second is printed even with --quiet,
// since it says something about the output, not about progress.
#pragma once

#include <filesystem>

namespace moequant::cli {

// "moequant: calibration coverage: ..." (unless `quiet`), then "moequant: note: calibration
// coverage: ..." naming the layers and experts that fell back to all tokens; nothing when the
// output has no coverage record.
void note_calibration_coverage(const std::filesystem::path& output, bool quiet);

}  // namespace moequant::cli
