#include "gguf_expert_tensor_name.hpp"

namespace moequant::formats {

std::string gguf_expert_tensor_name(std::int64_t layer, Projection projection) {
    return "blk." + std::to_string(layer) + ".ffn_" + std::string(projection_name(projection)) + "_exps.weight";
}

}  // namespace moequant::formats
