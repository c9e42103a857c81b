// SourceEncoding: how a checkpoint stores one weight, and how to get its values back.
//
// A weight is a dense [rows, cols] (or fused [E, rows, cols]) matrix the model computes with.
// Checkpoints store it in many ways: plain BF16/F16/F32, FP8 E4M3 with block, channel or
// tensor scales, compressed-tensors INT4/INT8 words with group scales, MXFP4 nibbles with E8M0
// scales, GPTQ words with zero points. An encoding plugin recognises the tensors of one weight
// from the safetensors headers and config.json's quantization_config (never from tensor data),
// and decodes a window of it. Consumers never learn the storage: they ask
// Checkpoint::weight(name) and load_expert_matrix() / decode_weight() (expert_matrix.hpp).
//
// The value rule every encoding follows (docs/encodings.md): each element is computed in
// float32 as code x scale with one multiply (a plain copy for plain floats), and rounded to
// BF16 with round-to-nearest-even when the BF16 target is asked for — the numerics of
// kt-kernel's own dequantize-then-convert scripts. Refused data (NaN scales, overflowing
// E8M0 exponents, out-of-range group indices) is an Error(input) naming tensor, row and block.
#pragma once

#include <moequant/export.hpp>
#include <moequant/options.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moequant {

class Checkpoint;
class ModelConfig;
class SourceEncoding;
struct TensorInfo;

// What decode() writes: BF16 bits (uint16) or float32 values.
enum class DecodeTarget : std::uint8_t { bf16, f32 };
MOEQUANT_API std::size_t decode_target_bytes(DecodeTarget target) noexcept;

// One weight as an encoding recognised it: plain data, printed by inspect and hashed into the
// run manifest's plan digest.
struct EncodedWeight {
    std::string name;        // the dense weight it stands for ("m.weight", "m.experts.gate_up_proj")
    Shape shape;             // its logical shape: [rows, cols] or [E, rows, cols]
    std::string encoding;    // the SourceEncoding's id
    std::string input_type;  // the --input-type spelling: bf16 fp16 fp32 fp8 int4 int8 mxfp4
    // The checkpoint tensors it is decoded from, (role, tensor name), the primary one first:
    // roles such as "weight", "scale", "packed", "zeros", "g_idx", "shape".
    std::vector<std::pair<std::string, std::string>> tensors;
    std::vector<std::string> ignored;  // tensors of this weight deliberately not read (input_scale)
    Options parameters;      // encoding facts: strategy=block|channel|tensor|group, block=128x128, bits=4, ...
    std::string summary;     // one line for people, e.g. "FP8 E4M3, per-channel F32 scales"
    std::uint64_t stored_bytes = 0;           // bytes of every tensor in `tensors`
    const SourceEncoding* decoder = nullptr;  // owned by the host's registry (never unloaded)

    // The tensor holding `role`, or an empty string.
    const std::string& tensor(std::string_view role) const noexcept {
        static const std::string none;
        for (const auto& [r, t] : tensors)
            if (r == role) return t;
        return none;
    }
    // The primary tensor (the first one).
    const std::string& primary() const noexcept { return tensors.front().second; }
};

// A window of a weight, in its logical coordinates: matrix `matrix` (0 for a 2-D weight), rows
// row_begin, row_begin + row_step, ... below row_end, and columns [col_begin, col_end).
struct DecodeWindow {
    std::int64_t matrix = 0;
    std::int64_t row_begin = 0;
    std::int64_t row_end = 0;
    std::int64_t row_step = 1;
    std::int64_t col_begin = 0;
    std::int64_t col_end = 0;

    std::int64_t rows() const noexcept {
        return row_end > row_begin ? (row_end - row_begin + row_step - 1) / row_step : 0;
    }
    std::int64_t cols() const noexcept { return col_end > col_begin ? col_end - col_begin : 0; }
};

class MOEQUANT_API SourceEncoding {
public:
    virtual ~SourceEncoding();

    // Encoding id, e.g. "fp8" ([a-z0-9_-]+, unique among every plugin's objects).
    virtual std::string_view id() const = 0;
    virtual std::string_view description() const = 0;
    // The --input-type spellings its weights can have.
    virtual std::vector<std::string> input_types() const = 0;

    // The dense weight a stored tensor would belong to, from the header entry alone
    // ("x.weight_scale_inv" -> "x.weight", "x_blocks" -> "x", "m.qweight" -> "m.weight");
    // nullopt when the tensor is not one of this encoding's components (or is the weight itself).
    virtual std::optional<std::string> weight_of(const TensorInfo& tensor) const = 0;

    // How well this encoding explains weight `name`: 0 = not mine, higher = better. On a match,
    // fills `out` (everything except `decoder`). `config` is config.json, or null when the
    // checkpoint has none. Throws Error(input) naming the tensor and the rule when the tensors are
    // unmistakably this encoding's but cannot be decoded exactly (a scale of the wrong shape, a
    // zero-point variant it does not implement).
    virtual int recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig* config,
                          EncodedWeight& out) const = 0;

    // Writes window.rows() x window.cols() values of `target`, row-major, into `out` (exactly that
    // many bytes). The window lies inside weight.shape (checked by the caller). Const and
    // thread-safe; single-threaded (callers split large windows by rows).
    virtual void decode(const Checkpoint& checkpoint, const EncodedWeight& weight, const DecodeWindow& window,
                        DecodeTarget target, std::span<std::byte> out) const = 0;
};

}  // namespace moequant
