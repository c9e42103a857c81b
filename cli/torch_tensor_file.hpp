// A file torch.load(..., weights_only=True) reads as {key: float32 tensor}: what SGLang's kt
// integration takes as --init-expert-location for its `frequency` expert placement (a dict with
// "logical_count" [buffer, layers, experts]). Written as torch.save writes (the zip archive of
// docs/pytorch-bin.md, entries stored uncompressed, a protocol-2 pickle that names only
// torch._utils._rebuild_tensor_v2, torch.FloatStorage and collections.OrderedDict), so that the
// restricted unpickler accepts it. docs/hybrid.md.
#pragma once

#include <moequant/tensor.hpp>

#include <string>
#include <vector>

namespace moequant::cli {

// The file's bytes: {key: tensor of `shape` holding `values`} (row-major float32).
std::string torch_tensor_dict_bytes(const std::string& key, const Shape& shape, const std::vector<float>& values);

}  // namespace moequant::cli
