// `gguf`: llama.cpp's GGUF (and kt-kernel's LLAMAFILE experts): gguf-split parts
// model-0000K-of-0000N.gguf, one per MoE layer holding its stacked experts
// (blk.L.ffn_{gate,up,down}_exps.weight, [E, out, in]), written as the layer completes (so a
// rerun adopts it), and the first part — the metadata, the tokenizer and every other tensor,
// quantized by llama-quantize's rules from the source — written last. Packed by size or into
// one file (gguf_packing.hpp), the layers' experts are staged and finish() writes every part. The expert matrices come
// quantized by the `gguf` quantizer, in the types this format chose (quantizer_options()).
#include "ggml_encoding.hpp"
#include "gguf_checkpoint_reader.hpp"
#include "gguf_expert_importance.hpp"
#include "gguf_plan.hpp"
#include "gguf_reader.hpp"
#include "kt_llamafile_check.hpp"
#include "writer_format.hpp"
#include "written_files.hpp"

#include "ggml_types.hpp"  // plugins/ggml_quants: the row codecs

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/input_file.hpp>
#include <moequant/output_file.hpp>
#include <moequant/parallel.hpp>
#include <moequant/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

using namespace moequant;
using namespace moequant::formats;
namespace fs = std::filesystem;

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span<const char>(s.data(), s.size())); }

// Rows [first, first + count) of a checkpoint weight as float32 (rows of its last dimension):
// decoded by its encoding (in BF16 when `bf16`), or converted from its stored dtype (rounded to
// BF16 when `bf16`).
std::vector<float> weight_rows(const Checkpoint& source, const std::string& name, std::int64_t first, std::int64_t count,
                               bool bf16) {
    const EncodedWeight* w = source.find_weight(name);
    if (w && w->shape.size() == 2) {
        const DecodeWindow window{.row_begin = first, .row_end = first + count, .col_end = w->shape[1]};
        const std::size_t n = static_cast<std::size_t>(window.rows() * window.cols());
        std::vector<float> out(n);
        if (bf16) {
            std::vector<std::uint16_t> decoded(n);
            decode_weight(source, *w, window, DecodeTarget::bf16, std::as_writable_bytes(std::span(decoded)));
            convert_bf16_to_f32(decoded.data(), out.data(), n);
        } else {
            decode_weight(source, *w, window, DecodeTarget::f32, std::as_writable_bytes(std::span(out)));
        }
        return out;
    }
    const TensorView v = source.view(name);
    const std::size_t row = v.shape.empty() ? 1 : static_cast<std::size_t>(v.shape.back());
    const std::size_t begin = static_cast<std::size_t>(first) * row, n = static_cast<std::size_t>(count) * row;
    if (begin + n > v.elements()) throw Error(ErrorKind::internal, "rows past the end of " + name);
    std::vector<float> out(n);
    const std::byte* data = static_cast<const std::byte*>(v.data());
    switch (v.dtype) {
    case DType::F32: std::memcpy(out.data(), data + begin * 4, n * 4); break;
    case DType::BF16: convert_bf16_to_f32(data + begin * 2, out.data(), n); break;
    case DType::F16: convert_f16_to_f32(data + begin * 2, out.data(), n); break;
    default:
        throw Error(ErrorKind::input, "is " + std::string(dtype_name(v.dtype)) + "; GGUF output reads float tensors",
                    {.tensor = name, .code = "UnsupportedDtype"});
    }
    if (bf16 && v.dtype != DType::BF16)
        for (float& x : out) x = bf16_to_f32(f32_to_bf16(x));
    return out;
}

// Rows of a tensor: its values over ne[0], one for a 1-D tensor.
std::int64_t tensor_rows(const GgufTensorInfo& info) {
    std::int64_t rows = 1;
    for (std::size_t d = 1; d < info.ne.size(); ++d) rows *= info.ne[d];
    return rows;
}

// Writes the zero padding after a part's last tensor: its length is its layout's (the gaps
// between tensors are holes, read as zeros).
void pad_to_end(OutputFile& file, const GgufSplit& split) {
    if (split.tensors.empty()) return;  // the header alone, already written
    const GgufPlannedTensor& last = split.tensors.back();
    const std::uint64_t end = last.info.offset + last.info.bytes;
    if (end < split.layout.file_size) file.write_at(end, std::vector<std::byte>(split.layout.file_size - end));
}

// Rows [first, first + count) of tensor `t`: the source's rows it takes (GgufPlannedTensor::
// source_rows, read in runs of consecutive rows), the columns it takes (source_cols), with its
// values transformed as the converter does in float32, then rounded to BF16 when `bf16`.
std::vector<float> tensor_rows_of(const Checkpoint& source, const GgufPlannedTensor& t, std::int64_t first, std::int64_t count, bool bf16) {
    using Values = GgufTensorTransform::Values;
    const bool transformed = t.values != Values::as_stored;
    std::vector<float> values;
    const bool round = bf16 && !transformed;
    if (t.source_rows.empty()) {
        values = weight_rows(source, t.source, first, count, round);
    } else {
        const auto taken = std::span(t.source_rows).subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(count));
        const auto [low, high] = std::minmax_element(taken.begin(), taken.end());
        if (*high - *low < 2 * count) {  // rows reordered nearby (the Q/K interleave): the span read once
            const std::vector<float> span = weight_rows(source, t.source, *low, *high - *low + 1, round);
            const std::size_t width = span.size() / static_cast<std::size_t>(*high - *low + 1);
            values.resize(static_cast<std::size_t>(count) * width);
            for (std::size_t r = 0; r < taken.size(); ++r)
                std::copy_n(span.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(taken[r] - *low) * width), width,
                            values.begin() + static_cast<std::ptrdiff_t>(r * width));
        } else {  // rows gathered from afar (qwen3next's per-head q/k/v): runs of consecutive ones
            for (std::size_t k = 0; k < taken.size();) {
                std::size_t run = 1;
                while (k + run < taken.size() && taken[k + run] == taken[k] + static_cast<std::int64_t>(run)) ++run;
                const std::vector<float> part = weight_rows(source, t.source, taken[k], static_cast<std::int64_t>(run), round);
                values.insert(values.end(), part.begin(), part.end());
                k += run;
            }
        }
    }
    if (!t.source_cols.empty()) {  // each row's columns the tensor takes, in its order
        const std::size_t width = values.size() / static_cast<std::size_t>(count), cols = t.source_cols.size();
        std::vector<float> taken(static_cast<std::size_t>(count) * cols);
        for (std::size_t r = 0; r < static_cast<std::size_t>(count); ++r)
            for (std::size_t c = 0; c < cols; ++c) taken[r * cols + c] = values[r * width + static_cast<std::size_t>(t.source_cols[c])];
        values = std::move(taken);
    }
    if (!transformed) return values;
    for (float& x : values) {
        x = t.values == Values::plus_one ? x + 1.0f : -std::exp(x);
        if (bf16) x = bf16_to_f32(f32_to_bf16(x));
    }
    return values;
}

// `values` (rows `first_row`.. of tensor `t`, in the tensor's row order) as `t`'s GGUF type,
// written at their place in `file`; each row weighed by its importance-matrix entry when it has one.
void write_rows(OutputFile& file, const GgufPlannedTensor& t, const std::vector<float>& values, std::int64_t first_row,
                const std::vector<float>& importance) {
    const std::int64_t cols = t.info.ne[0], rows = static_cast<std::int64_t>(values.size()) / cols;
    const std::uint64_t offset = t.info.offset + static_cast<std::uint64_t>(first_row) * (t.info.bytes / static_cast<std::uint64_t>(tensor_rows(t.info)));
    if (t.info.type == ggml_type_id::f32) {
        file.write_at(offset, std::as_bytes(std::span(values)));
        return;
    }
    const auto* type = ggml_quants::ggml_type_named(ggml_type_name_of(t.info.type));
    if (!type) throw Error(ErrorKind::internal, "no row codec for GGUF type " + std::to_string(t.info.type));
    const std::int64_t row_bytes = type->row_bytes(cols);
    // A 3-D tensor (attn_k_b: one matrix per head) is weighed per matrix, as llama-quantize hands
    // ggml imatrix + i03 * ne[0] for each.
    const std::int64_t rows_per_matrix = tensor_rows(t.info) / (t.info.ne.size() > 2 ? t.info.ne[2] : 1);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * row_bytes));
    parallel_for(0, static_cast<std::size_t>(rows), 64, [&](std::size_t begin, std::size_t end) {
        for (auto r = static_cast<std::int64_t>(begin); r < static_cast<std::int64_t>(end); ++r) {
            const std::int64_t matrix = (first_row + r) / rows_per_matrix;
            const float* weights = importance.empty() ? nullptr : importance.data() + matrix * cols;
            type->quantize(values.data() + r * cols, out.data() + r * row_bytes, cols, weights);
        }
    });
    file.write_at(offset, std::as_bytes(std::span<const std::uint8_t>(out)));
}

// An integer table (DeepSeek-V4's token -> expert hash routing) as the converter's I32.
void write_index_table(OutputFile& file, const Checkpoint& source, const GgufPlannedTensor& t) {
    const std::vector<std::int32_t> values = gguf_index_table(source, t.source, t.index_limit);
    file.write_at(t.info.offset, std::as_bytes(std::span(values)));
}

// Rows as the converter's Q8_0 holds them (DeepSeek-V4's FP8 weights): what llama-quantize
// dequantizes when it gives such a tensor another type.
void through_q8_0(std::vector<float>& values, std::int64_t cols) {
    const auto* q8 = ggml_quants::ggml_type_named("q8_0");
    std::vector<std::uint8_t> row(static_cast<std::size_t>(q8->row_bytes(cols)));
    for (std::size_t at = 0; at < values.size(); at += static_cast<std::size_t>(cols)) {
        q8->quantize(values.data() + at, row.data(), cols, nullptr);
        q8->dequantize(row.data(), values.data() + at, cols);
    }
}

// A non-expert tensor's data, written into `file` in chunks of rows (about 32 MiB of float32
// each), so a vocabulary-sized token_embd costs one chunk of memory, not the whole tensor twice.
void write_tensor(OutputFile& file, const Checkpoint& source, const GgufPlannedTensor& t, const ImatrixFile* imatrix) {
    using namespace ggml_type_id;
    if (t.info.type == i32) return write_index_table(file, source, t);
    // llama-quantize starts from the converter's values: its BF16 (an FP8 source's values are
    // not BF16), its F32 as they are, its Q8_0 (DeepSeek-V4) dequantized. The experts, decoded
    // elsewhere, start from BF16 too.
    const bool bf16 = t.converter_type == ggml_type_id::bf16;
    const bool via_q8_0 = t.converter_type == q8_0 && t.info.type != q8_0;
    const std::vector<float> importance = imatrix && t.importance ? imatrix->weights(*t.importance) : std::vector<float>{};
    const std::int64_t rows = tensor_rows(t.info), cols = t.info.ne[0];
    if (t.mla_part) {  // kv_b_proj's heads transposed: small, taken whole
        write_rows(file, t, mla_kv_b_part(weight_rows(source, t.source, 0, t.mla.heads * (t.mla.nope + t.mla.v), bf16), t.mla, *t.mla_part),
                   0, importance);
        source.release_pages(t.source);
        return;
    }
    constexpr std::int64_t chunk_values = 8 << 20;
    const std::int64_t chunk_rows = std::max<std::int64_t>(1, chunk_values / std::max<std::int64_t>(1, cols));
    for (std::int64_t first = 0; first < rows; first += chunk_rows) {
        const std::int64_t count = std::min(chunk_rows, rows - first);
        std::vector<float> values = tensor_rows_of(source, t, first, count, bf16);
        if (via_q8_0) through_q8_0(values, cols);
        write_rows(file, t, values, first, importance);
        source.release_pages(t.source);  // the chunk's mapped pages too: resident memory stays one chunk
    }
}

// One MoE layer's part: its header first, each expert's rows at their place as they come.
class GgufLayerSink final : public LayerSink {
public:
    GgufLayerSink(const fs::path& dir, const GgufSplit& split)
        : dir_(dir), split_(split), file_(dir / split.name, split.layout.file_size) {
        file_.write_at(0, bytes_of(split.layout.header));
    }

    void write(const QuantizedExpert& q) override {
        const GgufPlannedTensor& t = split_.tensors[static_cast<std::size_t>(q.projection)];
        const Tensor* rows = q.tensor.part("weight");
        if (!rows || q.part != 0 || rows->size_bytes() != static_cast<std::size_t>(t.expert_bytes))
            throw Error(ErrorKind::internal, "expert " + std::to_string(q.expert) + " of " + t.info.name + " is not one " +
                                                 std::to_string(t.expert_bytes) + "-byte " + std::string(ggml_type_name_of(t.info.type)) +
                                                 " matrix");
        file_.write_at(t.info.offset + static_cast<std::uint64_t>(q.expert * t.expert_bytes),
                       std::as_bytes(std::span<const std::byte>(rows->data(), rows->size_bytes())));
    }

    std::vector<WrittenFile> commit() override {
        pad_to_end(file_, split_);
        file_.commit();
        return {describe_written(dir_, split_.name)};
    }

private:
    fs::path dir_;
    const GgufSplit& split_;
    OutputFile file_;
};

// A staged layer's stacked experts, copied into their part in bounded chunks.
void copy_staged_experts(const fs::path& staged, const GgufPlannedTensor& from, OutputFile& to, const GgufPlannedTensor& into) {
    constexpr std::uint64_t chunk = 64ull << 20;
    const InputFile input = InputFile::open(staged);
    std::vector<std::byte> buffer(static_cast<std::size_t>(std::min(chunk, from.info.bytes)));
    for (std::uint64_t done = 0; done < from.info.bytes; done += chunk) {
        const std::size_t n = static_cast<std::size_t>(std::min(chunk, from.info.bytes - done));
        input.read_at(buffer.data(), n, from.info.offset + done);
        to.write_at(into.info.offset + done, std::span<const std::byte>(buffer.data(), n));
    }
}

class GgufWriter final : public OutputWriter {
public:
    explicit GgufWriter(const OutputContext& c) : c_(c), plan_(plan_gguf(c)) {}

    std::unique_ptr<LayerSink> begin_layer(std::int64_t layer) override {
        return std::make_unique<GgufLayerSink>(c_.directory, plan_.layer_files.at(layer));
    }
    std::vector<std::string> layer_files(std::int64_t layer) const override { return {plan_.layer_files.at(layer).name}; }
    void adopt_layer(std::int64_t) override {}
    bool folds_layer_files() const override { return plan_.packed; }

    // Last: the first part (metadata and every non-expert tensor, from the source) — or, packed,
    // every part, the experts copied from the layers' staging files, which then go.
    std::vector<WrittenFile> finish() override {
        std::vector<WrittenFile> written;
        for (const GgufSplit& split : plan_.splits) {
            if (!plan_.packed && &split != &plan_.splits.front()) break;  // the layers wrote the others
            OutputFile file(c_.directory / split.name, split.layout.file_size);
            file.write_at(0, bytes_of(split.layout.header));
            for (const auto& t : split.tensors) {
                if (t.layer >= 0) {
                    const GgufSplit& staged = plan_.layer_files.at(t.layer);
                    copy_staged_experts(c_.directory / staged.name, staged.tensors.at(static_cast<std::size_t>(t.projection)), file, t);
                    continue;
                }
                write_tensor(file, *c_.source, t, plan_.imatrix.get());
            }
            pad_to_end(file, split);
            file.commit();
            written.push_back(describe_written(c_.directory, split.name));
        }
        if (plan_.packed)
            for (const auto& [layer, staged] : plan_.layer_files) {
                std::error_code ec;
                fs::remove(c_.directory / staged.name, ec);
                if (ec)
                    throw Error(ErrorKind::io, "cannot remove the staged experts of layer " + std::to_string(layer) + ": " + ec.message(),
                                {.file = (c_.directory / staged.name).string(), .code = "WriteFailed"});
            }
        return written;
    }

    // Packed, the staging files too: they are on disk beside the parts at the end (the peak the
    // free-space check must see), then removed.
    std::vector<PlannedFile> planned() const {
        std::vector<PlannedFile> files;
        for (const auto& s : plan_.splits) files.push_back({s.name, s.layout.file_size});
        if (plan_.packed)
            for (const auto& [layer, staged] : plan_.layer_files) files.push_back({staged.name, staged.layout.file_size, true});
        return files;
    }

private:
    OutputContext c_;
    GgufPlan plan_;
};

class GgufFormat final : public WriterFormat<GgufWriter> {
public:
    std::string_view id() const override { return "gguf"; }
    std::string_view description() const override {
        return "GGUF for llama.cpp and kt-kernel's LLAMAFILE: gguf-split parts (one per MoE layer, or by size) or one file, "
               "llama-quantize's presets";
    }
    Options quantizer_options(const OutputContext& context) const override {
        Options options;
        const GgufPlan plan = plan_gguf(context);
        options.set("gguf.expert_types", gguf_expert_types(plan));
        if (plan.carries_mxfp4) options.set("gguf.carry", "mxfp4");
        return options;
    }
    void check(const OutputContext& context) const override {
        OutputFormat::check(context);
        if (!context.quantizer || !context.quantizer->facts().get_bool("gguf.mixture", false))
            throw Error(ErrorKind::usage, "the gguf format quantizes experts with the gguf quantizer, in the types it chooses",
                        {.hint = "convert --format gguf --quant-method PRESET (e.g. Q4_K_M)"});
        if (context.parts != 1) throw Error(ErrorKind::usage, "GGUF experts are stored whole, not in threadpool parts");
        plan_gguf(context);  // every tensor mapped and typed
    }
    // --imatrix: every value read and checked once, before any file is written.
    std::shared_ptr<const ExpertImportance> expert_importance(const OutputContext& context) const override {
        const GgufPlan plan = plan_gguf(context);
        if (!plan.imatrix) return nullptr;
        auto imatrix = std::make_shared<ImatrixFile>(ImatrixFile::open(plan.imatrix->path()));
        imatrix->check_contents();
        return std::make_shared<GgufExpertImportance>(std::move(imatrix), plan);
    }
    std::unique_ptr<OutputReader> open(const fs::path& directory) const override { return open_gguf(directory); }
    std::vector<RuntimeCheckInfo> runtime_checks() const override { return {kt_llamafile_check_info()}; }
};

}  // namespace

MOEQUANT_PLUGIN("gguf", "0.2.0", MOEQUANT_KIND_FORMAT | MOEQUANT_KIND_READER | MOEQUANT_KIND_ENCODING,
                "GGUF for llama.cpp and kt-kernel's LLAMAFILE: written, and read as a source") {
    registrar.add(std::make_unique<GgufFormat>());
    registrar.add(std::make_unique<GgufCheckpointReader>());
    registrar.add(std::make_unique<GgmlEncoding>());
}
