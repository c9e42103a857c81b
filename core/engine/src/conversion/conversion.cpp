#include "calibration/calibrated_layer.hpp"
#include "calibration/expert_tokens.hpp"

#include <moequant/engine/conversion.hpp>
#include <moequant/digest.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/input_file.hpp>
#include <moequant/output_file.hpp>
#include <moequant/engine/output_location.hpp>
#include <moequant/engine/output_lock.hpp>
#include <moequant/engine/output_overwrite.hpp>
#include <moequant/parallel.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/version.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <thread>

namespace moequant {

namespace fs = std::filesystem;

namespace {

constexpr std::array<Projection, 3> projections = {Projection::gate, Projection::up, Projection::down};

std::string input_type_name(DType d) {
    switch (d) {
        case DType::BF16: return "bf16";
        case DType::F16: return "fp16";
        case DType::F8_E4M3: return "fp8";
        default: return std::string(dtype_name(d));
    }
}

// Every routed expert must have the dtype the user declared (--input-type).
void check_input_type(const ConversionJob& job) {
    if (!job.input_type) return;
    for (const auto& layer : job.plan->moe_layers)
        for (const auto& e : layer.experts)
            for (const auto& s : e.weights)
                if (s.dtype != *job.input_type)
                    throw Error(ErrorKind::input,
                                "--input-type " + input_type_name(*job.input_type) + " was given, but the expert is " +
                                    std::string(dtype_name(s.dtype)),
                                {.tensor = s.tensor,
                                 .code = "InputTypeMismatch",
                                 .hint = "use --input-type " + input_type_name(s.dtype) + ", or leave it out"});
}

// A quantizer that uses calibration needs its data, one part per matrix, and inputs that fit
// the plan (and routers, when experts see only their routed tokens).
void check_calibration(const ConversionJob& job, const Quantizer& quantizer) {
    if (!job.calibration && !job.sequential)
        throw Error(ErrorKind::usage, "quantizer '" + std::string(quantizer.id()) + "' needs calibration data",
                    {.code = "NeedsCalibration", .hint = "pass --calibration-activations FILE, or use --quant_method RTN"});
    if (job.parts != 1)
        throw Error(ErrorKind::usage, "calibrated quantization writes one part per matrix, not " + std::to_string(job.parts));
    if (job.calibration) {
        job.calibration->check_plan(*job.plan);
        check_routing(*job.calibration, *job.plan, *job.source);
    } else if (job.sequential->routed_only()) {
        check_routers(*job.plan, *job.source);
    }
}

// Layers kept unquantized must be MoE layers, and are stored whole.
void check_unquantized_layers(const ConversionJob& job) {
    for (std::int64_t layer : job.unquantized_layers)
        if (std::none_of(job.plan->moe_layers.begin(), job.plan->moe_layers.end(),
                         [&](const MoeLayerPlan& l) { return l.layer == layer; }))
            throw Error(ErrorKind::usage, "layer " + std::to_string(layer) + " is not a MoE layer; it has no routed experts to keep");
    if (!job.unquantized_layers.empty() && job.parts != 1)
        throw Error(ErrorKind::usage, "unquantized experts are stored whole, not in " + std::to_string(job.parts) + " parts");
}

// Every expert matrix must split into the threadpool parts, and each part must be a shape the
// quantizer can pack (the first expert stands for all: the plan gives them one shape).
void check_expert_shapes(const ConversionJob& job, const Quantizer& quantizer) {
    if (job.plan->moe_layers.empty()) return;
    const ExpertPlan& e = job.plan->moe_layers.front().experts.front();
    for (Projection p : projections) {
        const auto& s = e.weights[static_cast<int>(p)];
        const std::int64_t split = p == Projection::down ? s.cols : s.rows;
        if (job.parts <= 0 || split % job.parts != 0)
            throw Error(ErrorKind::input,
                        "the expert size " + std::to_string(split) + " is not divisible by " + std::to_string(job.parts) +
                            " threadpool parts",
                        {.tensor = s.tensor, .code = "UnsplittableExpert"});
        const Shape part_shape = p == Projection::down ? Shape{s.rows, s.cols / job.parts} : Shape{s.rows / job.parts, s.cols};
        try {
            quantizer.output_layout(part_shape);
        } catch (const Error& err) {
            throw err.with_context({.tensor = s.tensor, .hint = "each of the " + std::to_string(job.parts) + " parts is " +
                                                                 shape_to_string(part_shape)});
        }
    }
}

// A job that passed validate_job(): its quantizer bound to the job's options, and what the
// format is told about the job.
struct CheckedJob {
    std::shared_ptr<const Quantizer> configured;  // owns the bound quantizer when configure() made one
    const Quantizer* quantizer = nullptr;         // the one to use: configured, else the job's; may be null
    OutputContext context;
};

// Every check of the job that touches no file, in one place and in this order: completeness,
// the input dtype, the quantizer's options, calibration, kept layers, the format's own checks,
// then the expert shapes. Throws the first problem found.
CheckedJob validate_job(const ConversionJob& job) {
    if (!job.source || !job.config || !job.plan || !job.format)
        throw Error(ErrorKind::internal, "incomplete conversion job");
    if (job.format->needs_quantizer() && !job.quantizer)
        throw Error(ErrorKind::usage, "format '" + std::string(job.format->id()) + "' needs a quantizer");
    check_input_type(job);
    CheckedJob checked;
    checked.configured = job.quantizer ? job.quantizer->configure(job.quantizer_options) : nullptr;  // bad options fail here
    checked.quantizer = checked.configured ? checked.configured.get() : job.quantizer;
    if (checked.quantizer && checked.quantizer->calibration()) check_calibration(job, *checked.quantizer);
    OutputContext& context = checked.context;
    context.directory = job.output;
    context.source = job.source;
    context.config = job.config;
    context.plan = job.plan;
    context.quantizer = checked.quantizer;
    context.parts = job.parts;
    context.options = job.format_options;
    context.unquantized_layers = job.unquantized_layers;
    check_unquantized_layers(job);
    job.format->check(context);
    if (checked.quantizer) check_expert_shapes(job, *checked.quantizer);
    return checked;
}

RunManifest describe_job(const ConversionJob& job) {
    RunManifest m;
    m.tool_version = MOEQUANT_VERSION_STRING;
    m.command = job.command;
    m.settings = {{"format", std::string(job.format->id())},
                  {"quantizer", job.quantizer ? std::string(job.quantizer->id()) : ""},
                  {"parts", std::to_string(job.parts)},
                  {"family", job.plan->family}};
    for (const auto& [k, v] : job.quantizer_options.items()) m.settings.emplace_back("quantizer." + k, v);
    for (const auto& [k, v] : job.format_options.items()) m.settings.emplace_back("format." + k, v);
    if (job.sequential) {  // built-in calibration: which token ids
        m.settings.emplace_back("calibration", "sequential:" + job.sequential->digest());
        m.settings.emplace_back("calibration.samples", std::to_string(job.sequential->samples()));
        m.settings.emplace_back("calibration.tokens", std::to_string(job.sequential->tokens()));
        m.settings.emplace_back("calibration.experts_see", job.sequential->routed_only() ? "routed tokens" : "all tokens");
    } else if (job.calibration) {  // which activations, by content (no paths in the manifest)
        const SafetensorsFile& f = job.calibration->file();
        m.settings.emplace_back("calibration", std::to_string(f.file_size()) + ":" + f.header_digest());
        m.settings.emplace_back("calibration.samples", std::to_string(job.calibration->samples()));
        m.settings.emplace_back("calibration.tokens", std::to_string(job.calibration->tokens()));
        m.settings.emplace_back("calibration.experts_see", job.calibration->routed_only() ? "routed tokens" : "all tokens");
    }
    if (!job.unquantized_layers.empty()) {
        std::string layers;
        for (std::int64_t l : job.unquantized_layers) layers += (layers.empty() ? "" : ",") + std::to_string(l);
        m.settings.emplace_back("unquantized_layers", layers);
    }
    m.source_fingerprint = source_fingerprint(*job.source);
    m.source_shards = source_shard_records(*job.source);
    m.plan_digest = plan_digest(*job.plan);
    return m;
}

// True when the folder holds nothing but a manifest, the lock and the tool's own partials: what a
// run killed or failed before it completed its first layer leaves behind.
bool holds_nothing_complete(const fs::path& dir) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name != run_manifest_name && name != output_lock_name && !is_partial_name(name)) return false;
    }
    return !ec;
}

// What --overwrite may remove: a conversion's files when the folder holds a manifest (even an
// unreadable one: the name is the tool's), and the files an earlier manifest lists.
OverwriteScope overwrite_scope(const fs::path& dir, const std::optional<RunManifest>& earlier) {
    OverwriteScope scope;
    std::error_code ec;
    scope.conversion_output = fs::is_regular_file(fs::symlink_status(dir / run_manifest_name, ec));
    std::set<std::string>& names = scope.names;
    if (!earlier) return scope;
    auto add = [&](const ManifestFile& f) {
        const fs::path name(f.name);
        if (!name.empty() && !name.is_absolute()) names.insert(name.begin()->string());
    };
    for (const auto& layer : earlier->completed_layers)
        for (const auto& f : layer.files) add(f);
    for (const auto& f : earlier->final_files) add(f);
    return scope;
}

// The side files a format will copy at the end are checked now, so a FIFO or a folder under such
// a name fails the run before its first layer rather than after its last.
void check_side_files(const Checkpoint& source) {
    for (const char* name : copied_side_files) {
        std::error_code ec;
        const fs::path file = source.directory() / name;
        if (fs::exists(file, ec)) require_small_file(file, tokenizer_file_limit);  // what copy_file_atomically reads
    }
}

// The output folder, checked against the inputs, created if needed and locked for this run.
std::unique_ptr<OutputFolderLock> lock_output(const ConversionJob& job) {
    check_side_files(*job.source);
    CommandInputs inputs{.folders = {job.source->directory()}, .files = job.input_files};
    if (job.calibration) inputs.files.push_back(job.calibration->path());
    check_output_folder(job.output, inputs, job.overwrite);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(job.output, ec)) && !fs::is_directory(job.output, ec))
        throw Error(ErrorKind::io, "the output path exists and is not a folder", {.file = job.output.string(), .code = "OutputExists"});
    fs::create_directories(job.output, ec);
    if (ec)
        throw Error(ErrorKind::io, "cannot create the output folder: " + ec.message(),
                    {.file = job.output.string(), .code = "WriteFailed"});
    return std::make_unique<OutputFolderLock>(job.output);
}

// What the locked output folder holds: the manifest to continue from, and the earlier run's
// record of the source shards (empty when starting afresh).
struct PreparedOutput {
    RunManifest manifest;
    RunManifest earlier;
};

PreparedOutput prepare_output(const ConversionJob& job) {
    PreparedOutput out{describe_job(job), {}};
    std::optional<RunManifest> earlier;
    try {
        earlier = RunManifest::load(job.output);
    } catch (const Error&) {
        if (!job.overwrite) throw;
    }
    if (earlier && earlier->same_job(out.manifest) && !job.overwrite) {
        out.manifest.completed_layers = earlier->completed_layers;
        out.earlier = std::move(*earlier);
        return out;
    }
    // Nothing completed yet, whoever started it: start afresh.
    if ((!earlier || (earlier->completed_layers.empty() && !earlier->complete)) && holds_nothing_complete(job.output)) {
        clear_for_overwrite(job.output, overwrite_scope(job.output, earlier));
        return out;
    }
    if (!job.overwrite)
        throw Error(ErrorKind::io,
                    earlier ? "the output folder holds the output of another conversion (different source, plan or settings)"
                            : "the output folder is not empty and holds no moequant-run.json",
                    {.file = job.output.string(), .code = "OutputExists", .hint = "choose another --output or pass --overwrite"});
    clear_for_overwrite(job.output, overwrite_scope(job.output, earlier));
    return out;
}

// The shards a layer's experts (and router) are read from.
std::set<std::string> shards_feeding(const Checkpoint& source, const MoeLayerPlan& layer) {
    std::set<std::string> shards;
    auto add = [&](const std::string& tensor) {
        if (!tensor.empty() && source.contains(tensor)) shards.insert(source.shard_of(tensor));
    };
    for (const auto& e : layer.experts)
        for (const auto& s : e.weights) {
            add(s.tensor);
            add(s.scale_tensor);
        }
    add(layer.router_weight);
    add(layer.router_bias);
    return shards;
}

// Why a layer an earlier run completed cannot be adopted, or nullopt when it can: every file it
// recorded must still hold the bytes written (digest), the format must name the same files, and
// the source shards feeding the layer must be as they were (size, modification time, header).
std::optional<std::string> why_redo(const ConversionJob& job, const OutputWriter& writer, const MoeLayerPlan& layer,
                                    const ManifestLayer& done, const RunManifest& earlier, const RunManifest& now) {
    auto expected = writer.layer_files(done.layer);
    if (expected.size() != done.files.size()) return "the output format now names other files for it";
    for (const auto& shard : shards_feeding(*job.source, layer)) {
        const ManifestShard* then = earlier.source_shard(shard);
        const ManifestShard* current = now.source_shard(shard);
        if (!then) return "the earlier run recorded no state of source shard " + shard;
        if (!current || !(*then == *current)) return "source shard " + shard + " changed since the layer was written";
    }
    for (const auto& f : done.files) {
        if (std::find(expected.begin(), expected.end(), f.name) == expected.end())
            return "the output format now names other files for it";
        std::error_code ec;
        const fs::path file = job.output / f.name;
        if (fs::is_symlink(file, ec) || !fs::is_regular_file(file, ec)) return f.name + " is missing or not a regular file";
        if (fs::file_size(file, ec) != f.bytes || ec) return f.name + " has another size than the earlier run wrote";
        if (file_digest(file) != f.digest) return f.name + " holds other bytes than the earlier run wrote";
    }
    return std::nullopt;
}

// Index of the first BF16 NaN or +-Inf (exponent bits all ones) in `bits`, or bits.size(). The
// common all-finite case is one branch-free max over the exponent fields, which vectorizes.
std::size_t first_non_finite(std::span<const std::uint16_t> bits) {
    std::uint16_t top = 0;
    for (std::uint16_t b : bits) top = std::max<std::uint16_t>(top, b & 0x7F80);
    if (top != 0x7F80) return bits.size();
    std::size_t i = 0;
    while ((bits[i] & 0x7F80) != 0x7F80) ++i;
    return i;
}

// A NaN or Inf in a weight would be quantized to garbage without a word (an Inf row scale makes
// every code of the row meaningless), so it is refused unless the user opts out. The position
// is given in the source tensor's coordinates.
void refuse_non_finite(const Tensor& matrix, const ExpertWeightSource& s) {
    std::span<const std::uint16_t> bits(matrix.data_as<std::uint16_t>(), matrix.elements());
    const std::size_t i = first_non_finite(bits);
    if (i == bits.size()) return;
    const std::int64_t cols = matrix.shape()[1];
    std::int64_t row = static_cast<std::int64_t>(i) / cols, col = static_cast<std::int64_t>(i) % cols;
    std::string where = "row " + std::to_string(row) + ", column " + std::to_string(col);
    if (s.slice) {
        if (s.slice->transposed) std::swap(row, col);
        (s.slice->along_columns ? col : row) += s.slice->offset;
        where = "[" + std::to_string(s.slice->expert) + ", " + std::to_string(row) + ", " + std::to_string(col) + "]";
    }
    const char* value = (bits[i] & 0x7F) ? "NaN" : (bits[i] & 0x8000) ? "-Inf" : "+Inf";
    throw Error(ErrorKind::input, std::string("holds ") + value + " at " + where,
                {.tensor = s.tensor,
                 .code = "NonFiniteWeight",
                 .hint = "the checkpoint is probably damaged; --allow-non-finite converts the values as they are"});
}

// An expert matrix in BF16, refused when it holds NaN/Inf (unless the job allows them).
Tensor load_checked(const ConversionJob& job, const ExpertWeightSource& source) {
    Tensor matrix = load_expert_matrix(*job.source, source, job.plan->fp8_block);
    if (!job.allow_non_finite) refuse_non_finite(matrix, source);
    return matrix;
}

// Runs `body` on every (expert x projection) matrix of a layer, in parallel, brought to BF16
// and checked for NaN/Inf; errors name the tensor and the layer.
template <class Body>
void for_each_expert_matrix(const ConversionJob& job, const MoeLayerPlan& layer, const Body& body) {
    const std::size_t tasks = layer.experts.size() * projections.size();
    parallel_for(0, tasks, 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t t = first; t < last; ++t) {
            const ExpertPlan& expert = layer.experts[t / 3];
            const Projection projection = projections[t % 3];
            const ExpertWeightSource& source = expert.weights[static_cast<int>(projection)];
            try {
                body(expert, projection, load_checked(job, source));
            } catch (const Error& e) {
                throw e.with_context({.tensor = source.tensor, .layer = layer.layer});
            }
        }
    });
}

// Passes parts on to the format's sink and keeps them: sequential calibration finishes the layer
// with its experts as quantized.
class RecordingSink final : public LayerSink {
public:
    explicit RecordingSink(LayerSink& inner) : inner_(inner) {}
    void write(const QuantizedExpert& part) override {
        inner_.write(part);
        QuantizedTensor copy;
        copy.method = part.tensor.method;
        copy.unquantized = part.tensor.unquantized;
        for (const auto& [name, tensor] : part.tensor.parts) copy.parts.emplace_back(name, Tensor::copy_of(tensor.view()));
        std::lock_guard lock(mutex_);
        parts_.emplace(std::pair{part.expert, part.projection}, std::move(copy));
    }
    std::vector<WrittenFile> commit() override { return inner_.commit(); }
    const QuantizedTensor& part(std::int64_t expert, Projection p) const { return parts_.at({expert, p}); }

private:
    LayerSink& inner_;
    std::mutex mutex_;
    std::map<std::pair<std::int64_t, Projection>, QuantizedTensor> parts_;
};

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
};

// Formats without a quantizer (bf16-safetensors) read the experts themselves: the matrices are
// checked for NaN/Inf before the format writes the layer.
class ExportMode final : public ConversionMode {
public:
    explicit ExportMode(const ConversionJob& job) : job_(job) {}

    std::vector<WrittenFile> convert_layer(const MoeLayerPlan& layer, OutputWriter& writer) override {
        if (!job_.allow_non_finite) for_each_expert_matrix(job_, layer, [](const ExpertPlan&, Projection, const Tensor&) {});
        return writer.begin_layer(layer.layer)->commit();
    }

private:
    const ConversionJob& job_;
};

// The modes with a quantizer: the layers listed in unquantized_layers are kept in BF16, one
// "weight" part per matrix; the others are quantized by the mode.
class QuantizingMode : public ConversionMode {
public:
    QuantizingMode(const ConversionJob& job, const Quantizer& quantizer) : job_(job), quantizer_(quantizer) {}

    std::vector<WrittenFile> convert_layer(const MoeLayerPlan& layer, OutputWriter& writer) override {
        const std::unique_ptr<LayerSink> sink = writer.begin_layer(layer.layer);
        write_layer(layer, *sink);
        return sink->commit();
    }

protected:
    virtual void quantize_layer(const MoeLayerPlan& layer, LayerSink& sink) = 0;

    void write_layer(const MoeLayerPlan& layer, LayerSink& sink) {
        if (!job_.unquantized_layers.count(layer.layer)) return quantize_layer(layer, sink);
        for_each_expert_matrix(job_, layer, [&](const ExpertPlan& expert, Projection projection, const Tensor& matrix) {
            QuantizedTensor kept;
            kept.unquantized = true;
            kept.parts.emplace_back("weight", Tensor::copy_of(matrix.view()));
            sink.write({expert.expert, projection, 0, std::move(kept)});
        });
    }

    const ConversionJob& job_;
    const Quantizer& quantizer_;
};

// Each (expert x projection) matrix split into the threadpool parts and quantized on its own.
class PlainMode final : public QuantizingMode {
public:
    using QuantizingMode::QuantizingMode;

private:
    void quantize_layer(const MoeLayerPlan& layer, LayerSink& sink) override {
        for_each_expert_matrix(job_, layer, [&](const ExpertPlan& expert, Projection projection, const Tensor& matrix) {
            for (int part = 0; part < job_.parts; ++part) {
                Tensor piece = split_expert_part(matrix, projection, part, job_.parts);
                QuantizedTensor quantized = quantizer_.quantize(piece.view());
                if (job_.saturated_rows)
                    job_.saturated_rows->add(expert.weights[static_cast<int>(projection)].tensor, projection, part, job_.parts,
                                             piece.shape()[0], quantizer_.saturated_rows(quantized, piece.shape()));
                sink.write({expert.expert, projection, part, std::move(quantized)});
            }
        });
    }
};

// The modes whose quantizer uses calibration (GPTQ): a layer is quantized through the
// quantizer's calibration facet on the inputs it saw (calibrated_layer.hpp), one part per matrix.
class CalibratedMode : public QuantizingMode {
public:
    CalibratedMode(const ConversionJob& job, const Quantizer& quantizer, const QuantizerCalibration& calibration,
                   ProgressSink& progress)
        : QuantizingMode(job, quantizer), calibration_(calibration), progress_(progress) {}

protected:
    void quantize_on(const CalibrationActivations& inputs, const MoeLayerPlan& layer, LayerSink& sink) {
        CalibratedLayerJob calibrated;
        calibrated.quantizer = &calibration_;
        calibrated.calibration = &inputs;
        calibrated.plan = job_.plan;
        calibrated.source = job_.source;
        calibrated.progress = &progress_;
        calibrated.load = [&](const ExpertWeightSource& source) {
            try {
                return load_checked(job_, source);
            } catch (const Error& e) {
                throw e.with_context({.tensor = source.tensor, .layer = layer.layer});
            }
        };
        quantize_calibrated_layer(calibrated, layer, sink);
    }

private:
    const QuantizerCalibration& calibration_;
    ProgressSink& progress_;
};

// Calibration on the recorded inputs of every layer (--calibration-activations).
class RecordedCalibrationMode final : public CalibratedMode {
public:
    using CalibratedMode::CalibratedMode;

private:
    void quantize_layer(const MoeLayerPlan& layer, LayerSink& sink) override { quantize_on(*job_.calibration, layer, sink); }
};

// Built-in calibration (sequential_calibration.hpp): each layer's inputs come from the decoder
// forward, and once written the layer is finished with its experts as quantized, so the next
// layers see them. No layer is adopted from an earlier run: the hidden states need every layer
// recomputed.
class SequentialCalibrationMode final : public CalibratedMode {
public:
    using CalibratedMode::CalibratedMode;

    bool adopts_completed_layers() const override { return false; }

    std::vector<WrittenFile> convert_layer(const MoeLayerPlan& layer, OutputWriter& writer) override {
        const std::unique_ptr<LayerSink> sink = writer.begin_layer(layer.layer);
        RecordingSink recording(*sink);
        inputs_ = &job_.sequential->layer_inputs(layer.layer);  // for every MoE layer, kept ones too
        write_layer(layer, recording);
        std::vector<WrittenFile> files = sink->commit();
        job_.sequential->finish_layer(layer.layer, [&](std::int64_t expert, Projection p) {
            const QuantizedTensor& q = recording.part(expert, p);
            if (q.unquantized) return Tensor::copy_of(q.part("weight")->view());
            const ExpertWeightSource& s = layer.experts[static_cast<std::size_t>(expert)].weights[static_cast<int>(p)];
            return quantizer_.dequantize(q, {s.rows, s.cols});
        });
        return files;
    }

private:
    void quantize_layer(const MoeLayerPlan& layer, LayerSink& sink) override { quantize_on(*inputs_, layer, sink); }

    const CalibrationActivations* inputs_ = nullptr;  // the layer being converted
};

// The mode of a checked job: `quantizer` is its bound quantizer (validate_job()).
std::unique_ptr<ConversionMode> conversion_mode(const ConversionJob& job, const Quantizer* quantizer, ProgressSink& progress) {
    if (!job.format->needs_quantizer()) return std::make_unique<ExportMode>(job);
    const QuantizerCalibration* calibration = quantizer->calibration();
    if (!calibration) return std::make_unique<PlainMode>(job, *quantizer);
    if (job.sequential) return std::make_unique<SequentialCalibrationMode>(job, *quantizer, *calibration, progress);
    return std::make_unique<RecordedCalibrationMode>(job, *quantizer, *calibration, progress);
}

// --resume-layer R: every layer before R must be complete; R and the layers after it are redone.
void resume_from(const ConversionJob& job, std::int64_t resume_layer, RunManifest& manifest) {
    for (const auto& layer : job.plan->moe_layers)
        if (layer.layer < resume_layer && !manifest.completed(layer.layer))
            throw Error(ErrorKind::usage,
                        "--resume-layer " + std::to_string(resume_layer) + ": layer " + std::to_string(layer.layer) +
                            " before it was not completed by an earlier run in this folder",
                        {.file = job.output.string(), .code = "ResumeGap"});
    std::erase_if(manifest.completed_layers, [&](const ManifestLayer& l) { return l.layer >= resume_layer; });
}

// Test hook: MOEQUANT_TEST_PAUSE_AFTER_LAYER_MS=N sleeps N ms after each committed layer, so the
// concurrency tests can start or kill a second run while the first one is mid-way.
void pause_for_tests() {
    static const long ms = [] {
        const char* v = std::getenv("MOEQUANT_TEST_PAUSE_AFTER_LAYER_MS");
        return v ? std::strtol(v, nullptr, 10) : 0L;
    }();
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

std::uint64_t total_bytes(const std::vector<WrittenFile>& files) {
    std::uint64_t n = 0;
    for (const auto& f : files) n += f.bytes;
    return n;
}

std::vector<ManifestFile> manifest_files(const std::vector<WrittenFile>& files) {
    std::vector<ManifestFile> out;
    for (const auto& f : files) out.push_back({f.name, f.bytes, f.digest});
    return out;
}

}  // namespace


ConversionResult run_conversion(const ConversionJob& job, ProgressSink& progress) {
    const auto start = std::chrono::steady_clock::now();
    const CheckedJob checked = validate_job(job);
    const std::unique_ptr<ConversionMode> mode = conversion_mode(job, checked.quantizer, progress);

    // One writer per folder, for the whole run; the checks above touched no file.
    const std::unique_ptr<OutputFolderLock> lock = lock_output(job);
    PreparedOutput prepared = prepare_output(job);
    RunManifest& manifest = prepared.manifest;
    if (job.resume_layer) resume_from(job, *job.resume_layer, manifest);
    manifest.complete = false;
    manifest.final_files.clear();
    // Before any output file: a run killed at any point leaves a folder a rerun recognises.
    manifest.save(job.output);

    std::unique_ptr<OutputWriter> writer = job.format->create(checked.context);

    ConversionResult result;
    std::uint64_t bytes_total = 0, bytes_done = 0;
    for (const auto& layer : job.plan->moe_layers) bytes_total += layer_input_bytes(layer);
    std::size_t index = 0;
    // What the earlier run completed, looked up as it was: the manifest saved after each layer
    // lists only the layers of this run so far.
    RunManifest carried;
    carried.completed_layers = manifest.completed_layers;
    std::vector<ManifestLayer> kept;
    for (const auto& layer : job.plan->moe_layers) {
        ++index;
        const std::uint64_t layer_bytes = layer_input_bytes(layer);
        const ManifestLayer* done = carried.completed(layer.layer);
        if (done && mode->adopts_completed_layers()) {
            if (const auto reason = why_redo(job, *writer, layer, *done, prepared.earlier, manifest)) {
                progress.note("layer " + std::to_string(layer.layer) + " is converted again: " + *reason);
            } else {
                writer->adopt_layer(layer.layer);
                kept.push_back(*done);
                ++result.layers_adopted;
                bytes_done += layer_bytes;
                continue;
            }
        }
        std::vector<WrittenFile> files = mode->convert_layer(layer, *writer);
        release_layer_pages(*job.source, layer);  // memory stays about one layer, whatever the model size
        result.output_bytes += total_bytes(files);
        kept.push_back({layer.layer, manifest_files(files)});
        manifest.completed_layers = kept;
        manifest.save(job.output);  // after every layer: an interrupted run resumes from here
        pause_for_tests();
        ++result.layers_written;
        bytes_done += layer_bytes;
        result.input_bytes += layer_bytes;
        progress.step(index, job.plan->moe_layers.size(), "layer", bytes_done, bytes_total);
    }
    manifest.completed_layers = kept;
    std::vector<WrittenFile> final_files = writer->finish();
    result.output_bytes += total_bytes(final_files);
    manifest.final_files = manifest_files(final_files);
    manifest.complete = true;
    manifest.save(job.output);
    progress.finish();
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

}  // namespace moequant
