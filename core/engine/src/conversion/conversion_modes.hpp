// How run_conversion() turns each MoE layer of the plan into the format's files.
#pragma once

#include <moequant/engine/conversion.hpp>
#include <moequant/engine/progress.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/output_format.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace moequant {

// How a conversion turns each MoE layer of the plan into the format's files. One object per
// kind of job: export (the format reads the experts itself), plain quantization, calibrated
// quantization on recorded inputs, and sequential calibration (conversion_mode() chooses).
class ConversionMode {
public:
    virtual ~ConversionMode() = default;
    // False when every layer must be converted again, whatever an earlier run completed.
    virtual bool adopts_completed_layers() const { return true; }
    // Converts the layer through one sink of `writer` and returns the files it committed.
    virtual std::vector<WrittenFile> convert_layer(const MoeLayerPlan& layer, OutputWriter& writer) = 0;
    // What calibration the layer just converted had (calibrated modes), for the run manifest.
    virtual std::optional<LayerCoverage> take_coverage() { return std::nullopt; }
};

// The mode of a checked job: `quantizer` is its bound quantizer, `importance` the format's
// importance matrix or null (validate_job()).
std::unique_ptr<ConversionMode> conversion_mode(const ConversionJob& job, const Quantizer* quantizer, const ExpertImportance* importance,
                                                ProgressSink& progress);

}  // namespace moequant
