// The calibration data of the commands that quantize with a calibrating quantizer (`gptq`,
// `convert --calibrate`): their shared flags, the checks between them, and the objects a
// ConversionJob reads — built-in calibration (a dataset run through the family's decoder forward
// layer by layer, sequential_calibration.hpp) or recorded MoE inputs (--calibration-activations).
#pragma once

#include "family_selection.hpp"

#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/calibration_dataset.hpp>
#include <moequant/engine/conversion.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/engine/progress.hpp>
#include <moequant/engine/sequential_calibration.hpp>

#include <boost/program_options.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace moequant::cli {

class ScratchFolder;

struct CalibrationInputOptions {
    std::string dataset;           // "embedded" or a JSONL file (built-in calibration)
    std::string activations;       // recorded MoE inputs
    std::string save_activations;  // with a dataset: also write the inputs it computes
    std::int64_t samples = 0, max_length = 0;  // 0: all recorded, or 512 rows x 2048 tokens of a dataset
    std::uint64_t seed = 42;
    std::string split = DatasetSelection{}.split;  // --dataset_split
    double max_memory_gb = 0;
    bool routed_only = false;
    std::string compute_dtype;     // --compute-dtype of the --dataset forward ("" = the CPU's default)

    bool given() const noexcept { return !dataset.empty() || !activations.empty(); }
};

// --calibration-activations, --dataset, --dataset_split, --num_calibration_samples,
// --max_sequence_length, --random_seed, --max-memory, --save-activations, --routed-only,
// --compute-dtype.
void add_calibration_options(boost::program_options::options_description& description, CalibrationInputOptions& options);

// Error(usage) for flags that contradict each other: both kinds of data, --routed-only or
// --save-activations without the data they need.
void check_calibration_options(const CalibrationInputOptions& options);

// The opened data: tokenized and ready to run (a dataset), or mapped (activations). Checks a
// --save-activations file against the command's inputs before any work.
class CalibrationInputs {
public:
    // `estimate_only` (--dry-run): a dataset is tokenized and planned but its hidden states are
    // not allocated (SequentialCalibration's estimate_only).
    CalibrationInputs(const Registry& registry, const PlannedSource& source, const CalibrationInputOptions& options,
                      bool overwrite, bool estimate_only = false);
    ~CalibrationInputs();
    CalibrationInputs(const CalibrationInputs&) = delete;
    CalibrationInputs& operator=(const CalibrationInputs&) = delete;

    // Points the job at the data (calibration or sequential, the files it reads, the label the
    // output records).
    void attach(ConversionJob& job);
    // The progress note saying what the quantizer calibrates on.
    void describe(ProgressSink& progress, const ModelPlan& plan) const;
    // After the conversion: commits --save-activations.
    void finish();
    // What the run puts in its scratch folder at most (a dataset's per-layer inputs; 0 without
    // one): checked before a real run, reported by a dry run.
    std::uint64_t scratch_bytes_needed() const noexcept { return scratch_needed_; }

private:
    CalibrationInputOptions options_;
    std::unique_ptr<ScratchFolder> scratch_;
    std::uint64_t scratch_needed_ = 0;
    std::string products_;  // what the forward's products run in (compute_dtype_option.hpp)
    std::unique_ptr<DecoderForward> forward_;
    std::optional<SequentialCalibration> sequential_;
    std::optional<CalibrationActivations> recorded_;
};

}  // namespace moequant::cli
