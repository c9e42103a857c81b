// kt-kernel's backward (SFT) weights of an AMX part: the part's BF16 matrix transposed and
// packed exactly like a forward matrix (its AMX_SFT_MOE "prepare_backward_weights": BufferB
// from_mat_transposed, the forward _pack_block on the transposed rows). A gate/up part
// [I/T, H] gives [H, I/T], a down part [H, I/T] gives [I/T, H]; each row of the transposed
// matrix gets its own scale. The amx quantizers configured with backward_weights return them
// as two more parts, named here, which the kt formats store under kt's `_bwd_` names.
#pragma once

#include <moequant/tensor.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::amx {

// The parts the backward weights add to a quantized part: the transposed matrix's codes and
// row scales (the kt formats know them by their "backward." prefix).
inline constexpr std::string_view backward_weight_part = "backward.weight";
inline constexpr std::string_view backward_scale_part = "backward.scale";

// The [n, k] BF16 matrix `bf16` as [k, n] (row-major both).
std::vector<std::uint16_t> transposed_bf16(const std::uint16_t* bf16, std::int64_t n, std::int64_t k);

// How far a decoded backward matrix [k, n] is from the source [n, k] transposed, against the
// per-element bounds of its rows (F32 [k, 1]): empty when every element is within, else a
// sentence naming how many are not (and the NaN/Inf it decodes to).
std::string backward_bound_problem(const Tensor& decoded, const Tensor& bounds, const std::vector<float>& source,
                                   std::int64_t n, std::int64_t k);

}  // namespace moequant::amx
