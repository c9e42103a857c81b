// The three projections of a SwiGLU expert, and which expert matrix a quantizer packs.
#pragma once

#include <moequant/export.hpp>

#include <array>
#include <cstdint>
#include <string_view>

namespace moequant {

// The three projections of a SwiGLU expert: down(act(gate(x)) * up(x)).
enum class Projection : std::uint8_t { gate = 0, up = 1, down = 2 };
// Every projection of an expert, in index order (ExpertPlan::weights is indexed by it).
inline constexpr std::array<Projection, 3> expert_projections = {Projection::gate, Projection::up, Projection::down};
MOEQUANT_API std::string_view projection_name(Projection p) noexcept;

// One routed-expert matrix as a quantizer sees it: its MoE layer and its projection (every
// expert and threadpool part of it is packed alike).
struct MatrixRole {
    std::int64_t layer = 0;
    Projection projection = Projection::gate;
};

}  // namespace moequant
