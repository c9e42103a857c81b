// A PyTorch zip checkpoint (torch.save since 1.6, e.g. pytorch_model.bin) as a safetensors
// header over the whole file (private to the SDK): the zip container (zip_archive.hpp) and the
// pickle (restricted_unpickler.hpp) give, for every tensor of the state dict, where its bytes
// lie in the file. Only what safetensors can describe is accepted: contiguous, little-endian
// tensors of a dtype moequant knows, inside their storage (docs/pytorch-bin.md).
#pragma once

#include <moequant/safetensors_reader.hpp>

#include <cstddef>
#include <span>
#include <string>

namespace moequant::detail {

struct TorchCheckpoint {
    // Each tensor's begin/end are offsets from the start of the file. Tensors that share a
    // storage (tied weights) may overlap. Sorted by offset; no __metadata__.
    SafetensorsHeader header;
    std::string pickle_digest;  // Digest64 (hex) of <archive>/data.pkl: what changes when the header does
};

// Reads the checkpoint held in `image` (the whole file); `file` names it in errors, which are
// Error(input) with a reason code (docs/pytorch-bin.md, "What moequant refuses").
TorchCheckpoint read_torch_checkpoint(std::span<const std::byte> image, const std::string& file);

}  // namespace moequant::detail
