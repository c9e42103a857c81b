// Names kt-kernel's CPU runtime looks for (kt-cpu-format.md §1, §6, §7), shared by the
// kt-safetensors and kt-tree formats. Header-only: each format module keeps its own copy. The
// method's own names (AMXINT4, file prefix INT4) are the quantizer's (its facts "kt.method" and
// "kt.file_prefix").
#pragma once

#include <moequant/model_adapter.hpp>
#include <moequant/quantizer.hpp>

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::formats {

// ffn_gate_exps / ffn_up_exps / ffn_down_exps
inline std::string kt_projection_name(Projection p) { return "ffn_" + std::string(projection_name(p)) + "_exps"; }

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

// "blk.{L}.ffn_{proj}_exps.{E}.numa.{i}." (kt-cpu-format.md §7.1); "weight" / "scale" follow.
inline std::string kt_tensor_base(std::int64_t layer, Projection p, std::int64_t expert, int part) {
    return "blk." + std::to_string(layer) + "." + kt_projection_name(p) + "." + std::to_string(expert) + ".numa." +
           std::to_string(part) + ".";
}

// "{P}_{proj}_{e}_{bytes}Byte_{quant|scale}_.kt" (kt-cpu-format.md §6).
inline std::string kt_file(const std::string& prefix, Projection p, std::int64_t expert, std::uint64_t bytes, bool scale) {
    return prefix + "_" + std::string(projection_name(p)) + "_" + std::to_string(expert) + "_" + std::to_string(bytes) +
           "Byte_" + (scale ? "scale" : "quant") + "_.kt";
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
