// OutputFormat: how converted experts and the other tensors are laid out on disk.
//
// A format creates an OutputWriter for one conversion. The host then, for every MoE layer of
// the plan that an earlier run did not complete, opens a LayerSink, hands it every quantized
// (expert, projection, part) — from several threads at once and in any order — and commits it;
// layers an earlier run completed are adopted instead. finish() writes everything else and the
// index, last. Writers write through OutputFile / SafetensorsWriter or under a temporary folder
// name, so nothing half-written carries a final name.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/export.hpp>
#include <moequant/importance.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/model_config.hpp>
#include <moequant/options.hpp>
#include <moequant/output_file.hpp>
#include <moequant/quantizer.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace moequant {

struct QuantizedExpert {
    std::int64_t expert = 0;
    Projection projection = Projection::gate;
    int part = 0;  // threadpool ("NUMA") part, 0 .. parts-1
    QuantizedTensor tensor;
};

// A file a writer produced, for the run manifest.
struct WrittenFile {
    std::string name;  // relative to the output folder
    std::uint64_t bytes = 0;
    std::string digest;  // Digest64 hex of the file's bytes
};

struct OutputContext {
    std::filesystem::path directory;       // output folder (exists)
    const Checkpoint* source = nullptr;    // the input checkpoint
    const ModelConfig* config = nullptr;   // its config.json
    const ModelPlan* plan = nullptr;
    const Quantizer* quantizer = nullptr;  // null for formats that need none
    int parts = 1;                         // threadpool parts of every expert matrix
    Options options;
    // MoE layers whose routed experts stay unquantized: their parts arrive as one BF16
    // "weight" [out, in] each (QuantizedTensor::unquantized) instead of the quantizer's
    // tensors (formats that support it).
    std::set<std::int64_t> unquantized_layers;
    // What a calibrated quantizer learned from, as the run manifest records it (e.g. "text
    // sequential:<digest>, 64 samples, 8192 tokens, every expert sees all tokens"), for formats
    // that record it in their files; empty when the quantizer does not calibrate.
    std::string calibration;
};

class MOEQUANT_API LayerSink {
public:
    virtual ~LayerSink();
    // Stores one quantized part. Thread-safe for distinct (expert, projection, part).
    virtual void write(const QuantizedExpert& expert) = 0;
    // Completes the layer's files (they carry their final names only after this).
    virtual std::vector<WrittenFile> commit() = 0;
};

class MOEQUANT_API OutputWriter {
public:
    virtual ~OutputWriter();
    virtual std::unique_ptr<LayerSink> begin_layer(std::int64_t layer) = 0;
    // The files a completed layer consists of (relative names), to check an earlier run's work.
    virtual std::vector<std::string> layer_files(std::int64_t layer) const = 0;
    // A layer completed by an earlier run: its files are on disk and are kept.
    virtual void adopt_layer(std::int64_t layer) = 0;
    // Writes the remaining tensors and side files, then the index (last). Without it the
    // output is not complete.
    virtual std::vector<WrittenFile> finish() = 0;
    // Whether finish() folds the layers' files into its own and removes them (e.g. GGUF parts
    // packed by size from per-layer staging files): the run manifest then records only
    // finish()'s files, and a rerun on the finished folder converts every layer again.
    virtual bool folds_layer_files() const;
};

// One quantized part a converted output stores: (layer, expert, projection, threadpool part).
struct StoredPartKey {
    std::int64_t layer = 0;
    std::int64_t expert = 0;
    Projection projection = Projection::gate;
    int part = 0;
    auto operator<=>(const StoredPartKey&) const = default;
};

// A stored part read back: the quantizer's parts ("weight", "scale", ...) with their bytes as
// stored, and where they are (a file, or file:tensor) for messages.
struct StoredPart {
    StoredPartKey key;
    std::string location;
    QuantizedTensor tensor;
};

// A named check of what a runtime needs of an output beyond its format (verify --for NAME), e.g.
// whether kt-kernel's RAWINT4 CPU experts can read a compressed-tensors folder. The format lists
// its checks (OutputFormat::runtime_checks()) and its reader runs them (run_runtime_check());
// verify reports every check of the output's format, and --for NAME makes one part of passing.
struct RuntimeCheckInfo {
    std::string name;            // e.g. "kt-rawint4" ([a-z0-9-]+; verify's JSON key is it with '_' for '-')
    std::string description;     // one line, e.g. "kt-kernel's --kt-method RAWINT4 CPU experts reading the folder"
    std::string runtime;         // how the report names the runtime, e.g. "kt-kernel RAWINT4"
    std::string target;          // how it is pointed at the output, e.g. "--kt-method RAWINT4 on this folder"
    std::string target_in_full;  // the same in the full report (--for NAME)
    // What the runtime chooses among (its verdicts), e.g. "backend" (JSON "backends"); who
    // chooses the first verdict by default, e.g. "kt"; the setting that chooses another, e.g.
    // "KT_RAWINT4_BACKEND".
    std::string verdict_kind, default_chooser, verdict_setting;
};

struct RuntimeCheckProblem {
    std::string rule;     // e.g. Int4Range
    std::string message;  // names the tensor (and file) and what is wrong
};

// A number the runtime derives from the output, e.g. kt's group size.
struct RuntimeCheckFact {
    std::string key;          // e.g. "group_size" (verify's JSON key)
    std::int64_t value = 0;   // 0 when not found
    std::string brief;        // its name in the one-line verdict, e.g. "group"
    std::string label;        // in the full report, e.g. "group size"
    std::string derivation;   // e.g. "hidden_size / the gate scale's columns, as kt derives it"
};

// One way the runtime may run the output (kt: a RAWINT4 backend) and whether it computes it right.
struct RuntimeVerdict {
    std::string name;  // e.g. "amx" (a value of RuntimeCheckInfo::verdict_setting)
    std::string when;  // when the runtime chooses it, and what it needs of the CPU and the launch
    bool runs = false;
    std::string why;   // why not, when it does not
};

struct RuntimeCheckReport {
    std::vector<RuntimeCheckProblem> problems;  // the first few of each rule
    std::size_t problem_count = 0;              // all of them
    std::vector<RuntimeCheckFact> facts;
    std::vector<RuntimeVerdict> verdicts;  // the runtime's default first; filled when no problem stops the layout
    std::vector<std::string> warnings;
    bool usable() const noexcept { return problem_count == 0; }
};

// A converted output opened for reading (moequant verify). Thread-safe for concurrent read()s.
class MOEQUANT_API OutputReader {
public:
    virtual ~OutputReader();
    // What the output records about itself, as string key/values: "method" (e.g. AMXINT4),
    // "quantizer" (e.g. amx-int4), "parts", "experts", "source"; absent keys are not recorded.
    // "experts_on" says which side of a hybrid model the output serves, "cpu" or "gpu" (eval
    // refuses one passed as the other side); absent when neither.
    // "method_fact_keys" lists, comma-separated, the Quantizer::facts() keys under which a
    // quantizer publishes the method (e.g. "kt.method,kt.file_prefix"): verify takes an output
    // that does not name its quantizer to be the installed plain quantizer's that publishes it.
    virtual Options recorded() const = 0;
    // Every quantized part the output holds, sorted.
    virtual std::vector<StoredPartKey> parts() const = 0;
    // Reads one part (throws Error(input) naming the file when it cannot be read).
    virtual StoredPart read(const StoredPartKey& key) const = 0;
    // Runs the runtime check `name` (one of the format's runtime_checks()) on this output for
    // the source's `plan`. Error(io) only when the output cannot be read at all; what the
    // runtime would trip over is a problem of the report. The default offers none (Error(internal)).
    virtual RuntimeCheckReport run_runtime_check(std::string_view name, const ModelPlan& plan) const;
};

class MOEQUANT_API OutputFormat {
public:
    virtual ~OutputFormat();

    // Object id, e.g. "kt-safetensors" ([a-z0-9_-]+).
    virtual std::string_view id() const = 0;
    virtual std::string_view description() const = 0;

    // False for formats that copy or convert tensors without a quantizer (bf16-safetensors).
    virtual bool needs_quantizer() const { return true; }

    // Refuses a job the format cannot write (e.g. shapes its runtime cannot run), with
    // Error(input) naming the tensor. Called before any file is touched; context.directory
    // may not exist yet. The default refuses context.unquantized_layers (Error(usage)).
    virtual void check(const OutputContext& context) const;

    // Options the format gives the job's quantizer, set over the job's own before the quantizer
    // is configured (Quantizer::configure()): what the quantizer needs to know of the layout the
    // format chose, e.g. the GGUF format's type for each expert matrix. Called before check(),
    // with context.quantizer null. None by default.
    virtual Options quantizer_options(const OutputContext& /*context*/) const { return {}; }

    // The importance of the experts' input columns the format was given in its options, in its
    // own naming (the gguf format's imatrix file); the host quantizes each expert matrix with it
    // through the quantizer's importance facet. Called after check(). None by default.
    virtual std::shared_ptr<const ExpertImportance> expert_importance(const OutputContext& /*context*/) const { return nullptr; }

    virtual std::unique_ptr<OutputWriter> create(const OutputContext& context) const = 0;
    // Every file create(context)'s writer writes for this job, with its exact size, computed
    // without writing or decoding anything (--dry-run and the free-disk check before a run);
    // context.directory need not exist. nullopt when the format cannot say (the default).
    virtual std::optional<std::vector<PlannedFile>> planned_files(const OutputContext& /*context*/) const {
        return std::nullopt;
    }
    // The runtime checks its outputs' readers run (OutputReader::run_runtime_check()); none by default.
    virtual std::vector<RuntimeCheckInfo> runtime_checks() const { return {}; }
    // Opens `directory` for reading when it holds a complete output of this format (recognised
    // by its own files, whoever wrote them); null when it is not this format's. Throws
    // Error(input) for this format's output when it is incomplete or broken.
    virtual std::unique_ptr<OutputReader> open(const std::filesystem::path& /*directory*/) const { return nullptr; }
};

}  // namespace moequant
