// Verifying a converted output against its source (moequant verify --source): every expected
// quantized part present with the quantizer's dtypes and sizes, nothing extra, and every part
// decoded from its packed bytes and compared with the source weight element by element
// against the quantizer's error bound (conventions.md §5). Optionally also y = W x straight
// from the packed layout (Quantizer::packed_gemv) against the source product.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/engine/progress.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/output_format.hpp>
#include <moequant/quantizer.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moequant {

// A converted output and the installed format that recognised it.
struct OpenedOutput {
    const OutputFormat* format = nullptr;
    std::unique_ptr<OutputReader> reader;
};

// Asks every installed format to open `directory` (OutputFormat::open); Error(input) when none
// recognises it, or when the one that does finds it incomplete or broken. A file instead of a
// folder (a .gguf model, any writer's) goes to the formats as it is, without a run manifest. The folder's run
// manifest (moequant-run.json), when it names a format, is read here: an unfinished conversion
// is refused (IncompleteOutput), and its recorded quantizer and parts are laid over what the
// format's files record.
OpenedOutput open_converted_output(const Registry& registry, const std::filesystem::path& directory);

// The quantizer that produced an output: `requested` (an id) if given, else the one the output
// records, else the installed one that publishes the recorded method under a fact key the output
// names (OutputReader::recorded(), "method_fact_keys"); configured with what the output records (Quantizer::configure).
// Error(plugin) when it is not installed, Error(input) when nothing names one.
std::shared_ptr<const Quantizer> output_quantizer(const Registry& registry, const OutputReader& output,
                                                               const std::string& requested);

// The threadpool part count of an output: what it records, else the highest stored part + 1.
int stored_part_count(const OutputReader& output);

struct VerificationJob {
    const Checkpoint* source = nullptr;
    const ModelPlan* plan = nullptr;
    const Quantizer* quantizer = nullptr;
    const OutputReader* output = nullptr;
    int parts = 0;                 // threadpool parts; 0 = what the output records
    bool gemv = false;             // also check y = W x from the packed layout
    std::uint64_t gemv_seed = 42;  // for the random x
    // With calibration data: each part's output error on it, tr(dW H dW^T), relative to the
    // source's tr(W H W^T), next to `reference`'s (RTN of the same scheme); a calibrated
    // quantizer (GPTQ) fails a part whose error exceeds the reference's (conventions.md §5).
    // With calibration->routed_only(), each expert is measured on the tokens routed to it.
    const CalibrationActivations* calibration = nullptr;
    const Quantizer* reference = nullptr;
};

// The result for one stored part (or one expected part that is missing).
struct PartCheck {
    StoredPartKey key;
    std::string location;       // where the output stores it
    std::string source_tensor;  // the source weight it was made from
    std::int64_t rows = 0, cols = 0;
    double max_abs_error = 0;   // max |source - decoded|
    double rel_rms_error = 0;   // ||source - decoded|| / ||source|| (0 for an all-zero source)
    double snr_db = 0;          // 10 log10(||source||^2 / ||source - decoded||^2); +inf when exact
    double bound_use = 0;       // max |error| / bound over the elements (1 = at the bound)
    std::int64_t beyond_bound = 0;   // elements whose error exceeds the bound
    std::int64_t nan = 0, inf = 0;   // non-finite decoded values (or stored scales)
    bool has_bound = false;          // the quantizer gives a per-element bound
    std::optional<double> gemv_rel_error;  // ||y_packed - y_source|| / ||y_source||
    std::int64_t gemv_rows_beyond_bound = 0;
    std::vector<std::int64_t> saturated_rows;  // rows of this part with saturated codes (accepted; see docs/cli.md, verify)
    std::optional<double> output_error;            // relative output error on the calibration data
    std::optional<double> reference_output_error;  // the reference quantizer's
    std::string problem;        // non-empty when this part fails; says why
};

struct VerificationReport {
    std::string quantizer;
    int parts = 0;
    std::vector<std::string> problems;  // missing or unexpected parts, recorded facts that disagree
    std::vector<PartCheck> checks;      // one per expected part, in key order
    std::uint64_t source_bytes = 0;     // expert bytes read from the source

    bool passed() const noexcept;
};

VerificationReport verify_output(const VerificationJob& job, ProgressSink& progress);

}  // namespace moequant
