// The conversion pipeline (architecture.md §3): for each MoE layer of the plan, one layer in
// flight — every (expert x projection) is read from its mmapped shard, brought to BF16 (FP8 is
// block-dequantized on the CPU), split into the threadpool parts and quantized, in parallel,
// and streamed into the output format's layer sink, which commits the layer atomically. Then
// the format writes everything else and its index. Memory stays bounded by the experts in
// flight, whatever the model size; the bytes do not depend on the number of threads.
//
// Reruns: the output folder's moequant-run.json records the job and its completed layers. A
// rerun of the same job adopts a completed layer while its files hold the bytes written and the
// source shards feeding it are unchanged (otherwise the layer is redone, with a progress note
// saying why); --resume-layer R redoes every layer >= R (the layers before R must be complete).
// A folder with another job's files is refused unless `overwrite` is set, which removes what a
// conversion writes and refuses a folder holding anything else (output_overwrite.hpp).
//
// Output safety (docs/safety.md, "Output folders"): before any file is touched the output is checked
// against the inputs (output_location.hpp), then locked for the whole run (output_lock.hpp).
//
// A routed-expert weight holding NaN or Inf (seen in BF16, after FP8 dequantization) is refused
// with Error(input, "NonFiniteWeight") naming the tensor, layer and first bad element, before
// its layer is committed, unless `allow_non_finite` is set.
//
// Every check of the job runs before any file is touched. The quantizer is first bound to
// quantizer_options (Quantizer::configure). Then each layer is converted in one of four modes:
// export (a format without a quantizer reads the experts itself), plain (each part quantized on
// its own), calibrated on recorded inputs (`calibration`) or sequential calibration
// (`sequential`). A quantizer that uses calibration (GPTQ) needs one of the two: per layer, one
// gate/up Hessian shared by all experts and a down_proj Hessian per expert
// (calibrated_layer.hpp), each threadpool part calibrated on the inputs it sees.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/engine/cluster.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/progress.hpp>
#include <moequant/engine/saturated_rows.hpp>
#include <moequant/engine/sequential_calibration.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/model_config.hpp>
#include <moequant/options.hpp>
#include <moequant/output_format.hpp>
#include <moequant/quantizer.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace moequant {

struct ConversionJob {
    std::string command = "convert";       // the sub-command, recorded in the run manifest
    const Checkpoint* source = nullptr;
    const ModelConfig* config = nullptr;
    const ModelPlan* plan = nullptr;
    const Quantizer* quantizer = nullptr;  // may be null when the format needs none
    const OutputFormat* format = nullptr;
    std::filesystem::path output;
    int parts = 2;                          // threadpool parts (kt "NUMA" sub-pools)
    std::optional<std::string> input_type;  // declared --input-type of the experts, checked against their encodings
    std::optional<std::int64_t> resume_layer;
    bool overwrite = false;
    bool allow_non_finite = false;          // convert NaN/Inf expert weights instead of refusing them
    const CalibrationActivations* calibration = nullptr;  // recorded MoE inputs (GPTQ)
    // Other files the job reads (a --dataset): the output folder may not hold them.
    std::vector<std::filesystem::path> input_files;
    // Or built-in calibration: each layer's inputs from the decoder forward, the layer then
    // finished with its quantized experts (sequential_calibration.hpp). Layers are never adopted
    // from an earlier run in this mode: the hidden states need every layer recomputed.
    SequentialCalibration* sequential = nullptr;
    // Names the calibration data in what the output records of it (OutputContext::calibration):
    // a dataset's file name, "embedded". Not part of the job's identity (the data's digest is).
    std::string calibration_label;
    // MoE layers whose routed experts are written unquantized (BF16), if the format supports
    // it (OutputContext::unquantized_layers); needs parts == 1.
    std::set<std::int64_t> unquantized_layers;
    Options quantizer_options;
    Options format_options;
    // Where the rows whose codes the quantizer saturates are logged (Quantizer::saturated_rows()),
    // for the caller's warning; null to not look for them.
    SaturatedRowLog* saturated_rows = nullptr;
    // The ranks sharing the run (cluster.hpp, docs/cluster.md); null: this process alone. Plain
    // and recorded-input conversions deal whole layers to ranks; sequential calibration shares
    // each layer's samples and experts out. Rank 0 holds the lock, the manifest and finish().
    Cluster* cluster = nullptr;
};

struct ConversionResult {
    std::size_t layers_written = 0;
    std::size_t layers_adopted = 0;
    std::uint64_t input_bytes = 0;   // expert bytes read this run
    std::uint64_t output_bytes = 0;  // bytes of the files written this run
    double seconds = 0;
};

ConversionResult run_conversion(const ConversionJob& job, ProgressSink& progress);

}  // namespace moequant
