// Copying a checkpoint with one defect: tests make a good checkpoint with synth, then rewrite it
// shard by shard with a tensor dropped, replaced or reshaped, or config.json edited.
#pragma once

#include <moequant/safetensors_writer.hpp>

#include <boost/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace moequant::test {

// A tensor to write instead of the original: spec plus bytes.
struct Replacement {
    TensorSpec spec;
    std::vector<std::uint8_t> bytes;
};

// Copies `from` into `to` shard by shard (side files as they are); `edit` may drop a tensor
// (return false) or replace it. `config_edit` changes config.json.
void rewrite(const std::filesystem::path& from, const std::filesystem::path& to,
             const std::function<bool(const std::string&, std::optional<Replacement>&)>& edit,
             const std::function<void(boost::json::object&)>& config_edit = {});

// Copies `from` into `to` with only config.json changed by `config_edit`.
void rewrite_config(const std::filesystem::path& from, const std::filesystem::path& to,
                    const std::function<void(boost::json::object&)>& config_edit);

// Copies `from` into `to` with `tensor` replaced by zeros of `dtype` and `shape` (a tensor of
// the wrong shape or type).
void rewrite_as_zeros(const std::filesystem::path& from, const std::filesystem::path& to, const std::string& tensor,
                      DType dtype, const Shape& shape);

// Changes the bytes of one tensor of a sharded checkpoint (or converted output) in place, its
// size and everything else in the files as they are: `edit` gets the tensor's data and size.
void edit_tensor_bytes(const std::filesystem::path& dir, const std::string& tensor,
                       const std::function<void(std::uint8_t*, std::size_t)>& edit);

}  // namespace moequant::test
