// Names kt-kernel's CPU runtime looks for (kt-cpu-format.md §1, §6, §7), shared by the
// kt-safetensors and kt-tree formats. Header-only: each format module keeps its own copy. The
// method's own names (AMXINT4, file prefix INT4) are the quantizer's (its facts "kt.method" and
// "kt.file_prefix").
#pragma once

#include <moequant/model_adapter.hpp>
#include <moequant/output_format.hpp>
#include <moequant/quantizer.hpp>

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::formats {

// kt-kernel's backward (SFT) weights of a part, convert --save-backward-weights: the quantizer
// returns them as parts "backward.weight" / "backward.scale" (the part transposed and packed
// alike), which kt names like the forward ones with "_bwd" after the projection:
// ffn_gate_bwd_exps, INT8_gate_bwd_0_...Byte_quant_.kt (docs/kt-backward-weights.md).
inline constexpr std::string_view kt_backward_part_prefix = "backward.";

// A quantizer part's kt tensor ("weight" / "scale") and whether it is a backward weight.
struct KtPartName {
    std::string tensor;
    bool backward = false;
};
inline KtPartName kt_part_name(std::string_view part) {
    if (part.starts_with(kt_backward_part_prefix)) return {std::string(part.substr(kt_backward_part_prefix.size())), true};
    return {std::string(part), false};
}
// The quantizer part a kt tensor of a forward or backward projection is.
inline std::string quantizer_part_name(std::string_view tensor, bool backward) {
    return backward ? std::string(kt_backward_part_prefix) + std::string(tensor) : std::string(tensor);
}

// gate / gate_bwd, as the kt names spell the projection.
inline std::string kt_projection_field(Projection p, bool backward) {
    return std::string(projection_name(p)) + (backward ? "_bwd" : "");
}

// ffn_gate_exps / ffn_up_exps / ffn_down_exps (and ffn_gate_bwd_exps ... for backward weights)
inline std::string kt_projection_name(Projection p, bool backward = false) {
    return "ffn_" + kt_projection_field(p, backward) + "_exps";
}

// The job asks for backward weights (format option backward_weights, convert
// --save-backward-weights): its quantizer must make them for every part.
inline bool backward_weights_requested(const OutputContext& context) {
    return context.options.get_bool("backward_weights", false);
}

// The method a kt method or `.kt` file prefix names, in kt-kernel's method spelling: its AMX
// methods name their files INT4 / INT8 (the kernel's name()) for AMXINT4 / AMXINT8, so a tree
// and a merged output of one method record the same method. Which quantizer made it is the
// host's to find, from the quantizers' published kt names (Quantizer::facts()).
inline std::string kt_method_of(std::string_view method_or_prefix) {
    if (method_or_prefix == "INT4") return "AMXINT4";
    if (method_or_prefix == "INT8") return "AMXINT8";
    return std::string(method_or_prefix);
}

inline std::optional<Projection> projection_from_name(std::string_view name) {
    for (Projection p : expert_projections)
        if (name == projection_name(p)) return p;
    return std::nullopt;
}

// The fields of a kt name between separators ("blk.3.ffn_up_exps" on '.', a .kt file name on '_').
inline std::vector<std::string_view> split_fields(std::string_view name, char separator) {
    std::vector<std::string_view> fields;
    for (std::size_t start = 0;;) {
        const std::size_t cut = name.find(separator, start);
        fields.push_back(name.substr(start, cut == std::string_view::npos ? std::string_view::npos : cut - start));
        if (cut == std::string_view::npos) return fields;
        start = cut + 1;
    }
}

// A non-negative decimal number without sign or leading zeros (as the writers print them).
inline std::optional<std::int64_t> parse_decimal(std::string_view text) {
    std::int64_t v = 0;
    if (text.empty() || (text.size() > 1 && text[0] == '0')) return std::nullopt;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return v;
}

// Whether the quantizer's kt method splits each expert matrix into threadpool ("NUMA") parts
// named ".numa.{i}" (every method but awq: its converter re-lays AutoAWQ's words whole and
// names them without, quantizer fact kt.threadpool_split = false; docs/kt-awq.md).
inline bool kt_splits_threadpools(const Quantizer& quantizer) {
    return quantizer.facts().get_bool("kt.threadpool_split", true);
}

// "blk.{L}.ffn_{proj}_exps.{E}.numa.{i}.{tensor}" for a quantizer part (kt-cpu-format.md §7.1),
// "blk.{L}.ffn_{proj}_exps.{E}.{tensor}" for a method without threadpool parts (`numa` false).
inline std::string kt_tensor_name(std::int64_t layer, Projection p, std::int64_t expert, int part, std::string_view quantizer_part,
                                  bool numa = true) {
    const KtPartName name = kt_part_name(quantizer_part);
    return "blk." + std::to_string(layer) + "." + kt_projection_name(p, name.backward) + "." + std::to_string(expert) +
           (numa ? ".numa." + std::to_string(part) : std::string()) + "." + name.tensor;
}

// "{P}_{proj}_{e}_{bytes}Byte_{quant|scale}_.kt" (kt-cpu-format.md §6) for a quantizer part:
// its "scale" goes to the scale file, its codes to the quant file.
inline std::string kt_file(const std::string& prefix, Projection p, std::int64_t expert, std::uint64_t bytes,
                           std::string_view quantizer_part) {
    const KtPartName name = kt_part_name(quantizer_part);
    return prefix + "_" + kt_projection_field(p, name.backward) + "_" + std::to_string(expert) + "_" +
           std::to_string(bytes) + "Byte_" + (name.tensor == "scale" ? "scale" : "quant") + "_.kt";
}

// The [rows, cols] matrix of one threadpool part: gate/up split by rows, down by columns.
inline Shape part_shape(const ExpertWeightSource& s, Projection p, int parts) {
    return p == Projection::down ? Shape{s.rows, s.cols / parts} : Shape{s.rows / parts, s.cols};
}

inline constexpr std::array<Projection, 3> kt_projection_order = {Projection::down, Projection::gate, Projection::up};

// Calls fn(expert, projection, part, spec) for every part the quantizer will produce for a
// layer, in kt-kernel's order (expert, then down/gate/up, then part).
template <class Fn>
void for_each_quantized_part(const MoeLayerPlan& layer, const Quantizer& quantizer, int parts, Fn&& fn) {
    for (const auto& e : layer.experts)
        for (Projection p : kt_projection_order)
            for (int i = 0; i < parts; ++i)
                for (const auto& spec : quantizer.quantizer_for({layer.layer, p})
                                            .output_layout(part_shape(e.weights[static_cast<int>(p)], p, parts)))
                    fn(e.expert, p, i, spec);
}

}  // namespace moequant::formats
