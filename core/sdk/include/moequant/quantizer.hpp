// Quantizer: turns one weight matrix into a packed representation.
//
// A quantizer receives a 2-D weight [rows = out_features, cols = in_features] in BF16 or F32
// and returns named parts (e.g. "weight" codes and "scale"), each an owning Tensor whose dtype
// and bytes are exactly what the output format stores. It must be deterministic and
// thread-safe: the host quantizes many matrices in parallel with one Quantizer object. It
// publishes what formats, verify and the CLI need to know about it (facts(), calibration use),
// so that none of them recognises a quantizer by its id.
#pragma once

#include <moequant/export.hpp>
#include <moequant/options.hpp>
#include <moequant/projection.hpp>
#include <moequant/tensor.hpp>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moequant {

class Checkpoint;
class Quantizer;
struct ExpertWeightSource;

struct QuantizedTensor {
    std::string method;                               // e.g. "AMXINT4"; empty when unquantized
    std::vector<std::pair<std::string, Tensor>> parts;  // e.g. {"weight", I8}, {"scale", F32}
    // The source matrix kept as it is (OutputContext::unquantized_layers): one BF16 "weight"
    // part [out, in], no quantizer involved.
    bool unquantized = false;

    const Tensor* part(std::string_view name) const noexcept {
        for (const auto& [n, t] : parts)
            if (n == name) return &t;
        return nullptr;
    }
};

// What a calibration-aware quantizer (GPTQ) derives from the inputs a matrix saw, e.g. the
// damped, reordered inverse-Hessian factor. Opaque to the host: computed once and shared by
// every matrix that saw the same inputs (all experts' gate and up projections of a layer).
class MOEQUANT_API PreparedCalibration {
public:
    virtual ~PreparedCalibration();
};

// The facet of a quantizer that learns from the inputs each matrix saw (GPTQ): the host
// computes each matrix's input Hessian, prepares it once for every matrix that saw the same
// inputs, and quantizes through this facet instead of Quantizer::quantize().
class MOEQUANT_API QuantizerCalibration {
public:
    virtual ~QuantizerCalibration();

    // Prepares what every matrix whose inputs have this Hessian shares. `hessian`: F32
    // [cols, cols], symmetric, H = 2/n * sum of x x^T over the tokens of the n calibration
    // samples (forward calls) the matrix saw (gptq-compressed-tensors.md §4.1).
    virtual std::shared_ptr<const PreparedCalibration> prepare_calibration(const Tensor& hessian) const = 0;

    // Quantizes like Quantizer::quantize(), using `calibration` from this facet's
    // prepare_calibration().
    virtual QuantizedTensor quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const = 0;
};

// The facet of a quantizer that carries a checkpoint's stored codes over instead of quantizing
// decoded values: kt-kernel's awq method re-lays AutoAWQ's qweight/qzeros/scales, GGUF's MXFP4
// keeps MXFP4 blocks. The host binds it to the form of the job's expert weights once, before
// any file is touched, and then takes each expert matrix's parts from the carrier of the
// quantizer that packs it (quantizer_for(role).carrier()), whole (one threadpool part); a matrix
// whose quantizer has no carrier is quantized from its decoded values (a GGUF mixture whose
// MXFP4 tensors are carried and the others requantized). A quantizer whose for_matrix()
// variants carry must have a carrier of its own: the host binds the job through it. Verify and
// eval bind it to the source the same way to read such outputs.
class MOEQUANT_API StoredCodeCarrier {
public:
    virtual ~StoredCodeCarrier();

    // The quantizer bound to the stored form of expert matrix `source` (e.g. AWQ's group size
    // and scale dtype), which the host uses for the whole job in place of this one: its
    // output_layout() follows that form and its carrier() carries every matrix of that form.
    // Null when this form is not carried and the quantizer quantizes decoded values instead.
    // Throws Error(input) naming the tensor when the form can be neither.
    virtual std::shared_ptr<const Quantizer> bind_source(const Checkpoint& checkpoint, const ExpertWeightSource& source) const = 0;

    // The parts of expert matrix `source`, re-laid from its stored tensors (on the bound
    // quantizer's carrier). Throws Error(input) naming the tensor when its form is not the bound one.
    virtual QuantizedTensor carry(const Checkpoint& checkpoint, const ExpertWeightSource& source) const = 0;
};

// The facet of a quantizer that weighs each input column's rounding error by its importance
// (ExpertImportance, importance.hpp: llama.cpp's imatrix): with the weights of a matrix, the
// host quantizes it through this facet instead of Quantizer::quantize().
class MOEQUANT_API QuantizerImportance {
public:
    virtual ~QuantizerImportance();

    // Quantizes like Quantizer::quantize(), each row's errors weighed by `column_weights` (one
    // per column of `weight`, finite, >= 0). Same layout as quantize().
    virtual QuantizedTensor quantize_weighted(const TensorView& weight, std::span<const float> column_weights) const = 0;
};

class MOEQUANT_API Quantizer {
public:
    virtual ~Quantizer();

    // Object id, e.g. "amx-int4" ([a-z0-9_-]+).
    virtual std::string_view id() const = 0;
    virtual std::string_view description() const = 0;

    // The names and relations this (configured) quantizer publishes for formats and verify, as
    // open key/values whose keys are namespaced by their reader: "kt.method" (kt-kernel's name
    // of the method, e.g. AMXINT4) and "kt.file_prefix" (of its `.kt` files, e.g. INT4) for the
    // kt formats, "ct.scheme" (e.g. W4A16) for compressed-tensors, "verify.reference" (the id
    // of the quantizer verify measures this one's output error against, e.g. "rtn" for gptq).
    // A reader ignores keys it does not know. The default publishes nothing.
    virtual Options facts() const { return {}; }

    // The name this quantizer publishes under `key` (facts()), else its id(): a format names
    // the method after the quantizer when the quantizer publishes no name for it.
    std::string published_name(std::string_view key) const { return facts().get_string(key, std::string(id())); }

    // A quantizer bound to `options` (e.g. bits, group size, ordering), whose output_layout()
    // follows them; the host calls it once per job, before any file is touched, and uses the
    // result instead of this object. Throws Error(usage) naming a bad option. Null when the
    // options change nothing this object would not do by itself.
    virtual std::shared_ptr<const Quantizer> configure(const Options& /*options*/) const { return nullptr; }

    // The quantizer that packs the expert matrix `role`, when its layout depends on which
    // matrix it is (kt-kernel's MOE_INT8 packs gate/up in blocks of 32 rows, down in blocks of
    // 64); null (the default) when this one packs every matrix alike. The result lives as long
    // as this object. The host, formats and verify use quantizer_for() for every expert matrix;
    // with a calibration facet (calibration()), each variant has its own, and the host
    // quantizes each matrix through its variant's.
    virtual const Quantizer* for_matrix(const MatrixRole& /*role*/) const { return nullptr; }
    const Quantizer& quantizer_for(const MatrixRole& role) const {
        const Quantizer* specific = for_matrix(role);
        return specific ? *specific : *this;
    }

    // What this (configured) quantizer does, as key/values a format records in its output
    // (e.g. compressed-tensors' quantization_config: num_bits, strategy, group_size, actorder).
    virtual Options settings() const { return {}; }

    // The parts quantize() returns for a [rows, cols] matrix: names, dtypes and shapes, known
    // before any data is quantized (so output files can be laid out up front). Throws
    // Error(input) naming the rule when the shape cannot be quantized.
    virtual std::vector<TensorSpec> output_layout(const Shape& matrix) const = 0;

    // Quantizes a [rows, cols] BF16 or F32 matrix. Throws Error(input) naming the rule when the
    // shape cannot be quantized (the caller adds the tensor name). A quantizer with a
    // calibration facet may refuse to quantize without it (Error(usage)).
    virtual QuantizedTensor quantize(const TensorView& weight) const = 0;

    // Whether the host gives quantize() the source's float32 decode instead of its BF16 one
    // (false, the default): true where rounding to BF16 first would change the result, as for
    // an F16 or F32 copy of a source whose values are not BF16 values (FP8 times a float scale).
    // The host keeps BF16 for matrices kept unquantized and for calibrated quantization.
    virtual bool takes_float32_source() const { return false; }

    // The calibration facet when this quantizer needs calibration data (GPTQ), else null. It
    // lives as long as this object; the host then quantizes every matrix through it.
    virtual const QuantizerCalibration* calibration() const { return nullptr; }

    // The facet that carries stored codes (StoredCodeCarrier) when this quantizer has one, else
    // null. It lives as long as this object.
    virtual const StoredCodeCarrier* carrier() const { return nullptr; }

    // The facet that weighs columns by importance (QuantizerImportance) when this quantizer has
    // one, else null (the host then quantizes without the importance it may have). It lives as
    // long as this object.
    virtual const QuantizerImportance* importance() const { return nullptr; }

    // Decodes parts produced by quantize() back to an F32 [rows, cols] matrix (used by verify).
    // Reads the packed bytes themselves; throws Error(input) when their sizes do not fit `shape`.
    virtual Tensor dequantize(const QuantizedTensor& quantized, const Shape& shape) const = 0;

    // The guaranteed bound of |source - dequantize()| per element, for the matrix quantize()
    // was given: an F32 [rows, groups] tensor, groups dividing cols, where element (r, c) is
    // bounded by B[r, c / (cols / groups)] (e.g. half a quantization step of the row).
    // nullopt when the method has no per-element bound (e.g. GPTQ). Used by verify.
    virtual std::optional<Tensor> error_bounds(const QuantizedTensor& /*quantized*/, const Shape& /*shape*/) const {
        return std::nullopt;
    }

    // What the quantizer can check about stored parts beyond a per-element bound, given the
    // source matrix (e.g. GPTQ: the scales are the min-max observer's); empty when all holds,
    // else what does not. Used by verify.
    virtual std::string stored_problem(const QuantizedTensor& /*stored*/, const TensorView& /*source*/) const { return {}; }

    // y = W x (x: cols values, y: rows values) computed straight from the packed parts, reading
    // them in the order a runtime kernel does, so verify --gemv proves the layout and not only
    // the codes. Returns false when the quantizer has no such product.
    virtual bool packed_gemv(const QuantizedTensor& /*quantized*/, const Shape& /*shape*/, const float* /*x*/,
                             float* /*y*/) const {
        return false;
    }

    // Rows of the [rows, cols] matrix `quantized` was made from whose codes the method saturates
    // instead of rounding, read from the stored parts (AMX: a row whose max |w| is below about
    // 3.3e-37, where 1/scale overflows, exactly as kt-kernel's own arithmetic does). The bytes
    // stay what the runtime would write; convert and verify warn naming the rows, and
    // error_bounds() must cover them, so both accept them alike. Empty when there are none.
    virtual std::vector<std::int64_t> saturated_rows(const QuantizedTensor& /*quantized*/, const Shape& /*shape*/) const {
        return {};
    }
};

}  // namespace moequant
