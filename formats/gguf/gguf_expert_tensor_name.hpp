// The GGUF name of a MoE layer's stacked expert tensor, shared by the gguf format (which writes
// the tensors) and llama.cpp's importance matrix files (whose entries must carry the same name
// for llama-quantize and convert --imatrix to find them).
#pragma once

#include <moequant/projection.hpp>

#include <cstdint>
#include <string>

namespace moequant::formats {

// blk.{L}.ffn_{gate,up,down}_exps.weight: the experts of a MoE layer, stacked [E, out, in].
std::string gguf_expert_tensor_name(std::int64_t layer, Projection projection);

}  // namespace moequant::formats
