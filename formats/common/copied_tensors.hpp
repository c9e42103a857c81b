// The tensors a format copies beside the quantized experts, and how: weights in a non-plain
// encoding (FP8, INT4, ...) are decoded to BF16 on the CPU and their side tensors dropped,
// everything else keeps its dtype and bytes; MTP layers and rotary buffers are never copied (conventions.md §4).
// Header-only, shared by the format modules.
#pragma once


#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/freed_heap.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/safetensors_writer.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace moequant::formats {

// The decoder layer a tensor belongs to ("...layers.{L}." anywhere in the name), or -1.
inline std::int64_t layer_of(const std::string& name) {
    for (std::size_t p = name.find("layers."); p != std::string::npos; p = name.find("layers.", p + 1)) {
        if (p > 0 && name[p - 1] != '.') continue;
        const char* begin = name.data() + p + 7;
        std::int64_t layer = -1;
        auto [end, ec] = std::from_chars(begin, name.data() + name.size(), layer);
        if (ec == std::errc() && end != begin && *end == '.') return layer;
    }
    return -1;
}

// True when a weight is stored in a non-plain encoding (FP8, INT4, MXFP4, ...): copies of it
// are decoded to BF16.
inline bool is_encoded(const EncodedWeight& w) {
    return w.input_type != "bf16" && w.input_type != "fp16" && w.input_type != "fp32";
}

// The name a stored tensor is copied under: its own, or for the primary tensor of an encoded
// weight the weight's name (`x.weight_packed` -> `x.weight`); nullopt for the other tensors of
// an encoded weight (scales, zero points, input_scale), which the decoded copy folds in.
inline std::optional<std::string> copied_name(const Checkpoint& source, const std::string& tensor) {
    const EncodedWeight* w = source.weight_holding(tensor);
    if (!w || !is_encoded(*w)) return tensor;
    if (tensor != w->primary()) return std::nullopt;
    return w->name;
}

// The tensors a BF16 copy of the checkpoint holds, in plan order: every tensor whose role
// `keep` accepts, except MTP layers, rotary buffers and what encoded weights fold in; encoded
// weights appear under their weight names.
template <class Keep>
std::vector<std::string> copied_tensors(const Checkpoint& source, const ModelPlan& plan, const Keep& keep) {
    std::vector<std::string> out;
    for (const auto& [name, role] : plan.roles) {
        if (role == TensorRole::skipped_mtp || role == TensorRole::skipped_buffer || !keep(role)) continue;
        if (auto copied = copied_name(source, name)) out.push_back(*copied);
    }
    return out;
}

// A fused (3-D) encoded weight [E, R, K] (gpt-oss's MXFP4 experts) is copied as transformers
// dequantizes it: each expert's matrix transposed, [E, K, R] (its convert_moe_packed_tensors
// ends with a transpose of the last two dimensions, model-families-2026.md §2.1).
inline Shape copied_shape(const EncodedWeight& w) {
    if (w.shape.size() != 3) return w.shape;
    return {w.shape[0], w.shape[2], w.shape[1]};
}

// The dtype the copies of floating-point tensors are written in: as stored (encoded weights
// decoded to BF16), or — the seed GPU tool's --torch_dtype, transformers' from_pretrained cast —
// every floating-point tensor in `floating`, except those whose name holds one of
// `kept_in_f32` as a dotted component (the model class's _keep_in_fp32_modules_strict), which
// transformers loads and saves in F32 whatever the checkpoint stored.
struct CopyDtype {
    std::optional<DType> floating;
    std::vector<std::string> kept_in_f32;

    // The dtype a tensor of `stored` dtype named `name` is copied in.
    DType of(const std::string& name, DType stored) const {
        if (!floating || !is_floating(stored)) return stored;
        for (const std::string& module : kept_in_f32)
            for (std::size_t at = name.find(module); at != std::string::npos; at = name.find(module, at + 1))
                if ((at == 0 || name[at - 1] == '.') && (at + module.size() == name.size() || name[at + module.size()] == '.'))
                    return DType::F32;
        return *floating;
    }
    static bool is_floating(DType d) { return d == DType::BF16 || d == DType::F16 || d == DType::F32; }
};

// "bfloat16" | "float16" | "float32" (the --torch_dtype values) as a dtype; nullopt otherwise.
inline std::optional<DType> torch_dtype_named(const std::string& name) {
    if (name == "bfloat16") return DType::BF16;
    if (name == "float16") return DType::F16;
    if (name == "float32") return DType::F32;
    return std::nullopt;
}

// `t` (BF16, F16 or F32) in `to`, rounded to nearest even as torch's Tensor.to() does, a
// million elements at a time (no float copy of a whole embedding).
inline Tensor converted_to(const TensorView& t, DType to) {
    Tensor out(to, t.shape);
    const std::size_t n = t.elements(), in_size = dtype_bits(t.dtype) / 8, out_size = dtype_bits(to) / 8;
    std::vector<float> values(std::min<std::size_t>(n, std::size_t{1} << 20));
    for (std::size_t at = 0; at < n; at += values.size()) {
        const std::size_t count = std::min(values.size(), n - at);
        const TensorView chunk{t.dtype, {static_cast<std::int64_t>(count)}, t.bytes.subspan(at * in_size, count * in_size)};
        decode_to_f32(chunk, std::span(values.data(), count));
        std::byte* dst = out.data() + at * out_size;
        if (to == DType::F32)
            std::memcpy(dst, values.data(), count * 4);
        else if (to == DType::BF16)
            convert_f32_to_bf16(values.data(), dst, count);
        else
            convert_f32_to_f16(values.data(), dst, count);
    }
    return out;
}

// The spec a copied tensor gets: BF16 with the weight's shape for encoded weights (fused ones
// transposed, copied_shape()), its own dtype and shape otherwise; then `dtype`'s choice.
inline TensorSpec copied_spec(const Checkpoint& source, const std::string& name, const CopyDtype& dtype = {}) {
    if (source.contains(name)) {
        const EncodedWeight* w = source.weight_holding(name);
        if (!w || !is_encoded(*w)) {
            const TensorInfo& info = source.info(name);
            return {name, dtype.of(name, info.dtype), info.shape};
        }
    }
    return {name, dtype.of(name, DType::BF16), copied_shape(source.weight(name))};
}

// Writes one copied tensor (under `as` when given): plain tensors streamed from the mmap
// (converted when `dtype` says so), encoded weights decoded to BF16 one matrix at a time.
inline void write_copied(SafetensorsWriter& writer, const Checkpoint& source, const std::string& name, const CopyDtype& dtype = {},
                         const std::string& as = {}) {
    const std::string& written_name = as.empty() ? name : as;
    if (source.contains(name)) {
        const EncodedWeight* w = source.weight_holding(name);
        if (!w || !is_encoded(*w)) {
            const TensorView view = source.view(name);
            const DType to = dtype.of(name, view.dtype);
            if (to == view.dtype)
                writer.write(written_name, view);
            else
                writer.write(written_name, converted_to(view, to).view());
            source.release_pages(name);  // copied once: its pages need not stay resident
            return;
        }
    }
    const EncodedWeight& w = source.weight(name);
    const DType to = dtype.of(name, DType::BF16);
    if (w.shape.size() == 2) {
        const Tensor decoded = decode_matrix(source, w);
        writer.write(written_name, to == DType::BF16 ? decoded.view() : converted_to(decoded.view(), to).view());
        for (const auto& [role, tensor] : w.tensors) source.release_pages(tensor);
        return;
    }
    {
        Tensor all(DType::BF16, copied_shape(w));
        const std::size_t rows = static_cast<std::size_t>(w.shape[1]), cols = static_cast<std::size_t>(w.shape[2]);
        for (std::int64_t m = 0; m < w.shape[0]; ++m) {
            const Tensor one = decode_matrix(source, w, m);  // [R, K]
            std::byte* out = all.data() + static_cast<std::size_t>(m) * rows * cols * 2;
            for (std::size_t r = 0; r < rows; ++r)
                for (std::size_t k = 0; k < cols; ++k) std::memcpy(out + (k * rows + r) * 2, one.data() + (r * cols + k) * 2, 2);
        }
        writer.write(written_name, to == DType::BF16 ? all.view() : converted_to(all.view(), to).view());
    }
    for (const auto& [role, tensor] : w.tensors) source.release_pages(tensor);
    // The whole decoded tensor is gone: give its pages back now. glibc raised its mmap threshold
    // when an earlier one was unmapped, so this one came from the heap and would otherwise stay
    // resident beside the next (measured: a gpt-oss export's peak 20.6 MB instead of 10.9).
    return_freed_heap();
}

}  // namespace moequant::formats
