// Names kt-kernel's CPU runtime looks for (kt-cpu-format.md §1, §6, §7), shared by the
// kt-safetensors and kt-tree formats. Header-only: each format module keeps its own copy.
#pragma once

#include <moequant/model_adapter.hpp>
#include <moequant/quantizer.hpp>

#include <string>

namespace moequant::formats {

// kt-kernel's method name: amx-int4 -> AMXINT4, amx-int8 -> AMXINT8; other quantizers keep
// their id.
inline std::string kt_method(const Quantizer& q) {
    if (q.id() == "amx-int4") return "AMXINT4";
    if (q.id() == "amx-int8") return "AMXINT8";
    return std::string(q.id());
}

// The `.kt` file prefix: INT4 / INT8 (the kernel's name()).
inline std::string kt_file_prefix(const Quantizer& q) {
    if (q.id() == "amx-int4") return "INT4";
    if (q.id() == "amx-int8") return "INT8";
    return std::string(q.id());
}

// ffn_gate_exps / ffn_up_exps / ffn_down_exps
inline std::string kt_projection_name(Projection p) { return "ffn_" + std::string(projection_name(p)) + "_exps"; }

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
                for (const auto& spec : quantizer.output_layout(part_shape(e.weights[static_cast<int>(p)], p, parts)))
                    fn(e.expert, p, i, spec);
}

}  // namespace moequant::formats
