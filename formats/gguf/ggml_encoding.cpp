#include "ggml_encoding.hpp"

#include "gguf_rope_interleave.hpp"
#include "ggml_types.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace moequant::formats {
namespace {

using ggml_quants::GgmlType;

// A part's name, split: the weight, its transform ("" as stored, "rope", "k_b", "v_b"), the heads
// of a rope part, and the ggml type.
struct PartName {
    std::string weight;
    std::string transform;
    std::int64_t heads = 0;
    const GgmlType* type = nullptr;
};

const GgmlType* f32_type() {
    // ggml's F32 rows are plain floats; ggml_types() lists the types moequant quantizes to.
    static const GgmlType type{"f32", 0, 1, 4, nullptr,
                               [](const std::uint8_t* in, float* y, std::int64_t n) { std::memcpy(y, in, static_cast<std::size_t>(n) * 4); }};
    return &type;
}

const GgmlType* type_named(std::string_view name) { return name == "f32" ? f32_type() : ggml_quants::ggml_type_named(name); }

std::optional<PartName> split_part_name(std::string_view tensor) {
    const std::size_t at = tensor.rfind(".gguf");
    if (at == std::string_view::npos || at == 0) return std::nullopt;
    std::string_view rest = tensor.substr(at + 5);
    const std::size_t dot = rest.find('.');
    if (dot == std::string_view::npos) return std::nullopt;
    PartName p{std::string(tensor.substr(0, at)), std::string(rest.substr(0, dot)), 0, type_named(rest.substr(dot + 1))};
    if (!p.type) return std::nullopt;
    if (p.transform.empty() || p.transform == "_k_b" || p.transform == "_v_b") {
        if (!p.transform.empty()) p.transform.erase(0, 1);
        return p;
    }
    if (p.transform.rfind("_rope", 0) != 0) return std::nullopt;
    const char* begin = p.transform.data() + 5;
    const char* end = p.transform.data() + p.transform.size();
    auto [stop, ec] = std::from_chars(begin, end, p.heads);
    if (ec != std::errc() || stop != end || p.heads <= 0) return std::nullopt;
    p.transform = "rope";
    return p;
}

// The values per row of a part: its bytes per row in whole blocks of its type.
std::int64_t row_values(const std::string& tensor, const TensorInfo& info, const GgmlType& type) {
    if (info.dtype != DType::U8 || info.shape.size() != 2 || info.shape[1] % type.block_bytes != 0)
        throw Error(ErrorKind::input, "is not whole rows of ggml type " + std::string(type.name), {.tensor = tensor, .code = "BadGgmlRows"});
    return info.shape[1] / type.block_bytes * type.block;
}

// Rows of one part, decoded one at a time into float32 as ggml decodes them.
class PartRows {
public:
    PartRows(const Checkpoint& checkpoint, const std::string& tensor, const GgmlType& type)
        : type_(type), view_(checkpoint.view(tensor)), values_(view_.shape[1] / type.block_bytes * type.block), row_(static_cast<std::size_t>(values_)) {}

    std::int64_t values() const noexcept { return values_; }
    std::int64_t rows() const noexcept { return view_.shape[0]; }
    const float* row(std::int64_t r) {
        const std::size_t bytes = static_cast<std::size_t>(view_.shape[1]);
        type_.dequantize(reinterpret_cast<const std::uint8_t*>(view_.bytes.data()) + static_cast<std::size_t>(r) * bytes, row_.data(), values_);
        return row_.data();
    }

private:
    const GgmlType& type_;
    TensorView view_;
    std::int64_t values_;
    std::vector<float> row_;
};

// Writes `values` (float32) as the target wants them.
void put(const float* values, std::size_t n, DecodeTarget target, std::byte* dst) {
    if (target == DecodeTarget::f32) std::memcpy(dst, values, n * 4);
    else convert_f32_to_bf16(values, dst, n);
}

}  // namespace

std::optional<std::string> GgmlEncoding::weight_of(const TensorInfo& tensor) const {
    if (tensor.dtype != DType::U8) return std::nullopt;
    auto part = split_part_name(tensor.name);
    if (!part) return std::nullopt;
    return part->weight;
}

int GgmlEncoding::recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig*, EncodedWeight& out) const {
    const std::vector<std::string>& names = checkpoint.tensor_names();
    const std::string prefix = std::string(name) + ".gguf";
    std::optional<std::pair<std::string, PartName>> whole, k_b, v_b;
    for (auto it = std::lower_bound(names.begin(), names.end(), prefix); it != names.end() && it->rfind(prefix, 0) == 0; ++it) {
        auto part = split_part_name(*it);
        if (!part || part->weight != name || checkpoint.info(*it).dtype != DType::U8) continue;
        (part->transform == "k_b" ? k_b : part->transform == "v_b" ? v_b : whole) = std::pair{*it, *part};
    }
    out.input_type = "gguf";
    if (whole) {
        const auto& [tensor, part] = *whole;
        const TensorInfo& info = checkpoint.info(tensor);
        const std::int64_t cols = row_values(tensor, info, *part.type);
        if (part.transform == "rope") check_rope_interleave(tensor, info.shape[0], part.heads);
        out.shape = {info.shape[0], cols};
        out.tensors = {{"weight", tensor}};
        out.parameters.set("type", std::string(part.type->name));
        if (part.heads) out.parameters.set("rope_heads", std::to_string(part.heads));
        out.summary = "GGUF " + std::string(part.type->name) + (part.heads ? ", llama's Q/K row order" : "");
        return 10;
    }
    if (!k_b || !v_b) return 0;
    // attn_k_b rows are [heads][kv_lora] of nope values; attn_v_b rows [heads][v] of kv_lora values.
    const TensorInfo &k = checkpoint.info(k_b->first), &v = checkpoint.info(v_b->first);
    const std::int64_t nope = row_values(k_b->first, k, *k_b->second.type), kv_lora = row_values(v_b->first, v, *v_b->second.type);
    const std::int64_t heads = kv_lora > 0 ? k.shape[0] / kv_lora : 0;
    if (heads <= 0 || k.shape[0] != heads * kv_lora || v.shape[0] % heads != 0)
        throw Error(ErrorKind::input,
                    "attn_k_b has " + std::to_string(k.shape[0]) + " rows and attn_v_b " + std::to_string(v.shape[0]) + " rows of " +
                        std::to_string(kv_lora) + ": not the per-head split of one kv_b_proj",
                    {.tensor = std::string(name), .code = "BadMlaSplit"});
    const std::int64_t v_head = v.shape[0] / heads;
    out.shape = {heads * (nope + v_head), kv_lora};
    out.tensors = {{"k_b", k_b->first}, {"v_b", v_b->first}};
    out.parameters.set("type", std::string(k_b->second.type->name) + "," + std::string(v_b->second.type->name));
    out.parameters.set("heads", std::to_string(heads));
    out.summary = "GGUF attn_k_b " + std::string(k_b->second.type->name) + " + attn_v_b " + std::string(v_b->second.type->name) + ", kv_b_proj rebuilt";
    return 10;
}

void GgmlEncoding::decode(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                          std::span<std::byte> out) const {
    const std::size_t cols = static_cast<std::size_t>(window.cols()), out_row = cols * decode_target_bytes(target);
    const std::size_t first = static_cast<std::size_t>(window.col_begin);
    std::size_t i = 0;
    if (const std::string& tensor = w.tensor("weight"); !tensor.empty()) {
        const auto part = split_part_name(tensor);
        PartRows rows(checkpoint, tensor, *part->type);
        // Hugging Face row r of a rope part is stored where llama's interleave put it (recognise()
        // checked the heads).
        for (std::int64_t r = window.row_begin; r < window.row_end; r += window.row_step, ++i)
            put(rows.row(part->heads ? rope_interleaved_row(r, rows.rows(), part->heads) : r) + first, cols, target, out.data() + i * out_row);
        return;
    }
    // kv_b_proj from its split: a K row (h, n) is column n of head h's attn_k_b block [kv_lora, nope],
    // a V row (h, m) is row m of head h's attn_v_b block. Each head's K block is decoded once.
    PartRows k(checkpoint, w.tensor("k_b"), *split_part_name(w.tensor("k_b"))->type);
    PartRows v(checkpoint, w.tensor("v_b"), *split_part_name(w.tensor("v_b"))->type);
    const std::int64_t nope = k.values(), kv_lora = v.values(), heads = k.rows() / kv_lora, v_head = v.rows() / heads;
    std::vector<float> block(static_cast<std::size_t>(kv_lora * nope)), row(static_cast<std::size_t>(kv_lora));
    std::int64_t decoded_head = -1;
    for (std::int64_t r = window.row_begin; r < window.row_end; r += window.row_step, ++i) {
        const std::int64_t h = r / (nope + v_head), at = r % (nope + v_head);
        const float* values;
        if (at < nope) {
            if (decoded_head != h) {
                for (std::int64_t j = 0; j < kv_lora; ++j) std::memcpy(block.data() + j * nope, k.row(h * kv_lora + j), static_cast<std::size_t>(nope) * 4);
                decoded_head = h;
            }
            for (std::int64_t j = 0; j < kv_lora; ++j) row[static_cast<std::size_t>(j)] = block[static_cast<std::size_t>(j * nope + at)];
            values = row.data();
        } else {
            values = v.row(h * v_head + (at - nope));
        }
        put(values + first, cols, target, out.data() + i * out_row);
    }
}

}  // namespace moequant::formats
