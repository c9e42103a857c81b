// The files and tensor names of the example format `example-layer-safetensors`:
//   experts-{L}.safetensors   one file per MoE layer, every quantized part of its experts,
//                             named layers.{L}.experts.{E}.{gate|up|down}.part{i}.{part name}
//   example-index.txt         written last, so a folder holding it is complete:
//                             "example-layer-safetensors 1", then "key value" lines
//                             (quantizer, parts, experts, layers, and the quantizer's settings
//                             as "setting.KEY VALUE")
// A format that another program reads would follow that program's loader here instead.
#pragma once

#include <moequant/model_adapter.hpp>
#include <moequant/quantizer.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace example_layer_safetensors {

inline constexpr std::string_view format_id = "example-layer-safetensors";
inline constexpr std::string_view index_file = "example-index.txt";
inline constexpr std::string_view index_magic = "example-layer-safetensors 1";

inline std::string layer_file(std::int64_t layer) { return "experts-" + std::to_string(layer) + ".safetensors"; }

inline std::string part_tensor_prefix(std::int64_t layer, std::int64_t expert, moequant::Projection p, int part) {
    return "layers." + std::to_string(layer) + ".experts." + std::to_string(expert) + "." +
           std::string(moequant::projection_name(p)) + ".part" + std::to_string(part) + ".";
}

// The matrix one threadpool part holds: the host splits gate and up by rows, down by columns.
inline moequant::Shape part_shape(const moequant::ExpertWeightSource& source, moequant::Projection p, int parts) {
    return p == moequant::Projection::down ? moequant::Shape{source.rows, source.cols / parts}
                                           : moequant::Shape{source.rows / parts, source.cols};
}

}  // namespace example_layer_safetensors
