#include "conversion/conversion_modes.hpp"

#include "calibration/calibrated_layer.hpp"
#include "calibration/importance_layer.hpp"
#include "cluster/wire.hpp"
#include "conversion/job_validation.hpp"

#include <moequant/engine/expert_parts.hpp>
#include <moequant/engine/profiler.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/parallel.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <tuple>
#include <utility>

namespace moequant {

namespace {

// Index of the first NaN or +-Inf (exponent bits all ones) among BF16 (uint16) or float32
// (uint32) bits, or bits.size(). The common all-finite case is one branch-free max over the
// exponent fields, which vectorizes.
template <class Bits>
std::size_t first_non_finite(std::span<const Bits> bits) {
    constexpr auto exponent = static_cast<Bits>(sizeof(Bits) == 2 ? 0x7F80u : 0x7F800000u);
    Bits top = 0;
    for (Bits b : bits) top = std::max<Bits>(top, b & exponent);
    if (top != exponent) return bits.size();
    std::size_t i = 0;
    while ((bits[i] & exponent) != exponent) ++i;
    return i;
}

// Index and value of the first NaN or +-Inf of a BF16 or F32 matrix (index = elements() if none).
std::pair<std::size_t, float> first_non_finite(const Tensor& matrix) {
    if (matrix.dtype() == DType::F32) {
        std::span<const std::uint32_t> bits(matrix.data_as<std::uint32_t>(), matrix.elements());
        const std::size_t i = first_non_finite(bits);
        return {i, i < bits.size() ? std::bit_cast<float>(bits[i]) : 0.0f};
    }
    std::span<const std::uint16_t> bits(matrix.data_as<std::uint16_t>(), matrix.elements());
    const std::size_t i = first_non_finite(bits);
    return {i, i < bits.size() ? std::bit_cast<float>(static_cast<std::uint32_t>(bits[i]) << 16) : 0.0f};
}

// A NaN or Inf in a weight would be quantized to garbage without a word (an Inf row scale makes
// every code of the row meaningless), so it is refused unless the user opts out. The position
// is given in the source tensor's coordinates.
void refuse_non_finite(const Tensor& matrix, const ExpertWeightSource& s) {
    const auto [i, bad] = first_non_finite(matrix);
    if (i == matrix.elements()) return;
    const std::int64_t cols = matrix.shape()[1];
    std::int64_t row = static_cast<std::int64_t>(i) / cols, col = static_cast<std::int64_t>(i) % cols;
    std::string where = "row " + std::to_string(row) + ", column " + std::to_string(col);
    if (s.slice) {
        if (s.slice->transposed) std::swap(row, col);
        (s.slice->along_columns ? col : row) += s.slice->offset;
        where = "[" + std::to_string(s.slice->expert) + ", " + std::to_string(row) + ", " + std::to_string(col) + "]";
    }
    const char* value = std::isnan(bad) ? "NaN" : std::signbit(bad) ? "-Inf" : "+Inf";
    throw Error(ErrorKind::input, std::string("holds ") + value + " at " + where,
                {.tensor = s.tensor,
                 .code = "NonFiniteWeight",
                 .hint = "the checkpoint is probably damaged; --allow-non-finite converts the values as they are"});
}

// An expert matrix in BF16 (or the float32 decode, for a quantizer that takes it), refused
// when it holds NaN/Inf (unless the job allows them).
Tensor load_checked(const ConversionJob& job, const ExpertWeightSource& source, bool float32 = false) {
    const ProfileSpan span("decode", source.tensor);
    Tensor matrix = load_expert_matrix(*job.source, source, float32 ? DecodeTarget::f32 : DecodeTarget::bf16);
    if (!job.allow_non_finite) refuse_non_finite(matrix, source);
    return matrix;
}

// Whether the quantizer packing matrix `role` takes the float32 decode (null: nothing quantizes).
bool float32_source(const Quantizer* quantizer, const MatrixRole& role) {
    return quantizer && quantizer->quantizer_for(role).takes_float32_source();
}

// Runs `body` on every (expert x projection) matrix of a layer, in parallel, brought to BF16
// (float32 where `quantizer` packs the matrix from it) and checked for NaN/Inf; errors name the
// tensor and the layer.
template <class Body>
void for_each_expert_matrix(const ConversionJob& job, const MoeLayerPlan& layer, const Quantizer* quantizer, const Body& body) {
    const std::size_t tasks = layer.experts.size() * expert_projections.size();
    parallel_for(0, tasks, 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t t = first; t < last; ++t) {
            const ExpertPlan& expert = layer.experts[t / expert_projections.size()];
            const Projection projection = expert_projections[t % expert_projections.size()];
            const ExpertWeightSource& source = expert.weights[static_cast<int>(projection)];
            try {
                body(expert, projection, load_checked(job, source, float32_source(quantizer, {layer.layer, projection})));
            } catch (const Error& e) {
                throw e.with_context({.tensor = source.tensor, .layer = layer.layer});
            }
        }
    });
}

// Keeps the parts written to it, passing them on to the format's sink if it has one:
// sequential calibration finishes the layer with its experts as quantized, and across ranks
// the parts are collected here, exchanged, and written by rank 0.
class RecordingSink final : public LayerSink {
public:
    explicit RecordingSink(LayerSink* inner) : inner_(inner) {}
    void write(const QuantizedExpert& part) override {
        if (inner_) inner_->write(part);
        QuantizedTensor copy = copy_of(part.tensor);
        std::lock_guard lock(mutex_);
        parts_.emplace(std::tuple{part.expert, part.projection, part.part}, std::move(copy));
    }
    std::vector<WrittenFile> commit() override { return inner_ ? inner_->commit() : std::vector<WrittenFile>{}; }
    const QuantizedTensor& part(std::int64_t expert, Projection p, int part) const { return parts_.at({expert, p, part}); }

    // What this rank quantized, as bytes for the others ...
    std::string encoded() const {
        detail::WireWriter w;
        w.u64(parts_.size());
        for (const auto& [key, tensor] : parts_) {
            const auto& [expert, projection, part] = key;
            detail::write_quantized_expert(w, expert, projection, part, tensor);
        }
        return w.take();
    }
    // ... and what another rank quantized.
    void add_encoded(std::string_view bytes) {
        detail::WireReader in(bytes);
        for (std::uint64_t n = in.count(1); n > 0; --n) {
            QuantizedExpert part = detail::read_quantized_expert(in);
            parts_.emplace(std::tuple{part.expert, part.projection, part.part}, std::move(part.tensor));
        }
    }
    void write_to(LayerSink& sink) const {
        for (const auto& [key, tensor] : parts_) {
            const auto& [expert, projection, part] = key;
            sink.write({expert, projection, part, copy_of(tensor)});
        }
    }

private:
    static QuantizedTensor copy_of(const QuantizedTensor& t) {
        QuantizedTensor copy{t.method, {}, t.unquantized};
        for (const auto& [name, tensor] : t.parts) copy.parts.emplace_back(name, Tensor::copy_of(tensor.view()));
        return copy;
    }

    LayerSink* inner_;
    std::mutex mutex_;
    std::map<std::tuple<std::int64_t, Projection, int>, QuantizedTensor> parts_;
};

// Formats without a quantizer (bf16-safetensors) read the experts themselves: the matrices are
// checked for NaN/Inf before the format writes the layer.
class ExportMode final : public ConversionMode {
public:
    explicit ExportMode(const ConversionJob& job) : job_(job) {}

    std::vector<WrittenFile> convert_layer(const MoeLayerPlan& layer, OutputWriter& writer) override {
        if (!job_.allow_non_finite) for_each_expert_matrix(job_, layer, nullptr, [](const ExpertPlan&, Projection, const Tensor&) {});
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
        for_each_expert_matrix(job_, layer, nullptr, [&](const ExpertPlan& expert, Projection projection, const Tensor& matrix) {
            QuantizedTensor kept;
            kept.unquantized = true;
            kept.parts.emplace_back("weight", Tensor::copy_of(matrix.view()));
            sink.write({expert.expert, projection, 0, std::move(kept)});
        });
    }

    const ConversionJob& job_;
    const Quantizer& quantizer_;
};

// Each (expert x projection) matrix split into the threadpool parts and quantized on its own,
// with its columns' importance when the format has an importance matrix — or, where the
// quantizer packing it carries stored codes, those codes re-laid.
class PlainMode final : public QuantizingMode {
public:
    PlainMode(const ConversionJob& job, const Quantizer& quantizer, const ExpertImportance* importance, ProgressSink& progress)
        : QuantizingMode(job, quantizer), importance_(importance), progress_(progress) {}

private:
    void quantize_layer(const MoeLayerPlan& layer, LayerSink& sink) override {
        std::mutex unseen_mutex;
        std::set<std::int64_t> unseen;  // experts the importance matrix saw no token of
        for_each_expert_matrix(job_, layer, &quantizer_, [&](const ExpertPlan& expert, Projection projection, const Tensor& matrix) {
            const Quantizer& quantizer = quantizer_.quantizer_for({layer.layer, projection});
            // A quantizer that carries the stored codes (validate_job bound it, one part): the
            // matrix's parts re-laid from its stored tensors. Its decoded values were still
            // checked for NaN/Inf, the rule every method follows (the decode is paid even with
            // --allow-non-finite: one path for carried and quantized matrices).
            if (const StoredCodeCarrier* carrier = quantizer.carrier()) {
                const ExpertWeightSource& source = expert.weights[static_cast<int>(projection)];
                QuantizedTensor carried = [&] {
                    const ProfileSpan span("carry", source.tensor);
                    return carrier->carry(*job_.source, source);
                }();
                const ProfileSpan span("write");
                sink.write({expert.expert, projection, 0, std::move(carried)});
                return;
            }
            const ColumnImportance importance = columns_of(layer, expert, projection, matrix);
            if (importance.tokens == 0) {
                std::lock_guard lock(unseen_mutex);
                unseen.insert(expert.expert);
            }
            for (int part = 0; part < job_.parts; ++part) {
                // One part is the whole matrix: quantized where it lies, not copied first.
                const Tensor split = job_.parts == 1 ? Tensor() : split_expert_part(matrix, projection, part, job_.parts);
                const Tensor& piece = job_.parts == 1 ? matrix : split;
                QuantizedTensor quantized = [&] {
                    const ProfileSpan span("quantize", expert.weights[static_cast<int>(projection)].tensor);
                    if (importance.weights.empty()) return quantizer.quantize(piece.view());
                    return quantizer.importance()->quantize_weighted(piece.view(), part_columns(importance.weights, projection, part, job_.parts));
                }();
                if (job_.saturated_rows)
                    job_.saturated_rows->add(expert.weights[static_cast<int>(projection)].tensor, projection, part, job_.parts,
                                             piece.shape()[0], quantizer.saturated_rows(quantized, piece.shape()));
                const ProfileSpan span("write");
                sink.write({expert.expert, projection, part, std::move(quantized)});
            }
        });
        if (!unseen.empty()) {
            std::string ids;
            for (std::int64_t e : unseen) ids += (ids.empty() ? "" : ", ") + std::to_string(e);
            progress_.note("layer " + std::to_string(layer.layer) + ": the importance matrix saw no token of expert(s) " + ids +
                           "; they are quantized with its stand-in weights (llama.cpp's: 1 per column)");
        }
    }

    // The importance of one expert matrix's columns (none without an importance matrix).
    ColumnImportance columns_of(const MoeLayerPlan& layer, const ExpertPlan& expert, Projection projection, const Tensor& matrix) const {
        if (!importance_) return {};
        ColumnImportance importance = importance_->columns({layer.layer, projection}, expert.expert);
        const auto cols = static_cast<std::size_t>(matrix.shape()[1]);
        if (!importance.weights.empty() && importance.weights.size() != cols)
            throw Error(ErrorKind::input, "the importance matrix has " + std::to_string(importance.weights.size()) +
                                              " column weights for expert " + std::to_string(expert.expert) + "'s " +
                                              std::string(projection_name(projection)) + " matrix of " + std::to_string(cols) + " columns",
                        {.code = "ImportanceSizeMismatch"});
        return importance;
    }

    const ExpertImportance* importance_;
    ProgressSink& progress_;
};

// The modes whose quantizer learns from calibration: a layer is quantized through the
// calibration facet of each matrix's quantizer_for() on the inputs it saw (GPTQ,
// calibrated_layer.hpp), or through its importance facet with the importance measured on them
// (llama.cpp's imatrix, importance_layer.hpp), each threadpool part on its own.
class CalibratedMode : public QuantizingMode {
public:
    CalibratedMode(const ConversionJob& job, const Quantizer& quantizer, ProgressSink& progress)
        : QuantizingMode(job, quantizer), progress_(progress) {}

protected:
    void quantize_on(const CalibrationActivations& inputs, const MoeLayerPlan& layer, LayerSink& sink) {
        CalibratedLayerJob calibrated;
        calibrated.quantizer = &quantizer_;
        calibrated.calibration = &inputs;
        calibrated.plan = job_.plan;
        calibrated.source = job_.source;
        calibrated.progress = &progress_;
        calibrated.parts = job_.parts;
        calibrated.owns = owns_;
        auto load = [&](const ExpertWeightSource& source, bool float32) {
            try {
                return load_checked(job_, source, float32);
            } catch (const Error& e) {
                throw e.with_context({.tensor = source.tensor, .layer = layer.layer});
            }
        };
        calibrated.load = [load](const ExpertWeightSource& source) { return load(source, false); };
        calibrated.load_float32 = [load](const ExpertWeightSource& source) { return load(source, true); };
        coverage_ = quantizer_.calibration() ? quantize_calibrated_layer(calibrated, layer, sink)
                                             : quantize_importance_layer(calibrated, layer, sink);
    }

    std::optional<LayerCoverage> take_coverage() override { return std::exchange(coverage_, std::nullopt); }

    std::function<bool(std::size_t)> owns_;  // the experts this rank quantizes (null: all)

private:
    std::optional<LayerCoverage> coverage_;
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
        Cluster& cluster = job_.cluster ? *job_.cluster : Cluster::alone();
        inputs_ = &job_.sequential->layer_inputs(layer.layer);  // for every MoE layer, kept ones too
        std::vector<WrittenFile> files;
        if (cluster.size() == 1) {
            const std::unique_ptr<LayerSink> sink = writer.begin_layer(layer.layer);
            RecordingSink recording(sink.get());
            write_layer(layer, recording);
            files = sink->commit();
            finish(layer, recording);
            return files;
        }
        // Across ranks: expert e is quantized on rank e mod N, on the same inputs; every rank
        // receives every expert (the next layer's forward needs them all) and rank 0 writes
        // the layer. A layer kept in BF16 is read whole by every rank: nothing to exchange.
        RecordingSink recording(nullptr);
        const bool kept = job_.unquantized_layers.count(layer.layer) > 0;
        const auto ranks = static_cast<std::size_t>(cluster.size()), rank = static_cast<std::size_t>(cluster.rank());
        owns_ = [=](std::size_t e) { return e % ranks == rank; };
        write_layer(layer, recording);
        owns_ = nullptr;
        if (!kept)
            cluster.share(recording.encoded(), [&](int r, std::string_view bytes) {
                if (r != cluster.rank()) recording.add_encoded(bytes);
            });
        if (cluster.root()) {
            const std::unique_ptr<LayerSink> sink = writer.begin_layer(layer.layer);
            recording.write_to(*sink);
            files = sink->commit();
        }
        finish(layer, recording);
        return files;
    }

private:
    // Completes the layer in the forward with its experts as quantized.
    void finish(const MoeLayerPlan& layer, const RecordingSink& recording) {
        job_.sequential->finish_layer(layer.layer, [&](std::int64_t expert, Projection p) {
            const QuantizedTensor& first = recording.part(expert, p, 0);
            if (first.unquantized) return Tensor::copy_of(first.part("weight")->view());  // kept layers have one part
            const ExpertWeightSource& s = layer.experts[static_cast<std::size_t>(expert)].weights[static_cast<int>(p)];
            // An importance matrix is measured on the model as it is (llama-imatrix runs the
            // unquantized model): the next layers see the source experts.
            if (!quantizer_.calibration()) return load_checked(job_, s);
            const int parts = job_.parts;
            const Shape shape = p == Projection::down ? Shape{s.rows, s.cols / parts} : Shape{s.rows / parts, s.cols};
            std::vector<Tensor> pieces;
            const Quantizer& quantizer = quantizer_.quantizer_for({layer.layer, p});
            for (int part = 0; part < parts; ++part) pieces.push_back(quantizer.dequantize(recording.part(expert, p, part), shape));
            return join_expert_parts(pieces, p);
        });
    }

    void quantize_layer(const MoeLayerPlan& layer, LayerSink& sink) override { quantize_on(*inputs_, layer, sink); }

    const CalibrationActivations* inputs_ = nullptr;  // the layer being converted
};

}  // namespace

std::unique_ptr<ConversionMode> conversion_mode(const ConversionJob& job, const Quantizer* quantizer, const ExpertImportance* importance,
                                                ProgressSink& progress) {
    if (!job.format->needs_quantizer()) return std::make_unique<ExportMode>(job);
    const bool learns = quantizer->calibration() || ((job.sequential || job.calibration) && weighs_by_importance(*quantizer, *job.plan));
    if (!learns) return std::make_unique<PlainMode>(job, *quantizer, importance, progress);
    if (job.sequential) return std::make_unique<SequentialCalibrationMode>(job, *quantizer, progress);
    return std::make_unique<RecordedCalibrationMode>(job, *quantizer, progress);
}

}  // namespace moequant
