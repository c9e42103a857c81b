// The run manifest's record of a conversion job (what decides its bytes), shared by the run and
// by --dry-run's estimate of the manifest.
#pragma once

#include <moequant/engine/conversion.hpp>
#include <moequant/engine/run_manifest.hpp>

namespace moequant {

// The command and everything that decides the output bytes (no paths, no times), and the source
// and plan it was made from.
// `importance`: what the format's importance matrix is (CheckedJob::importance), or null.
RunManifest describe_job(const ConversionJob& job, const ExpertImportance* importance);

}  // namespace moequant
