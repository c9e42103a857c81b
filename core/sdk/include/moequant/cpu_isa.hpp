// Run-time choice of the vector instruction set used by moequant's kernels.
//
// Every kernel has a scalar path and, where it pays, AVX2 and AVX-512 paths; all of them
// produce identical bytes. The best path the CPU supports is used unless a lower limit is
// set (tests run every available path; users can set MOEQUANT_ISA=scalar|avx2|avx512).
#pragma once

#include <moequant/export.hpp>

#include <optional>
#include <string_view>
#include <vector>

namespace moequant {

enum class Isa : int {
    scalar = 0,
    avx2 = 1,    // AVX2 + FMA + F16C
    avx512 = 2,  // AVX-512 F, BW, VL, DQ
};

// The best ISA this CPU and OS support.
MOEQUANT_API Isa detected_isa() noexcept;

// The ISA kernels use now: the detected one, capped by the last set_isa_limit() or, if that
// was never called, by the MOEQUANT_ISA environment variable (read once, on first use; an
// unknown value is reported on stderr and ignored).
MOEQUANT_API Isa active_isa() noexcept;

// Caps the ISA kernels may use (a limit above detected_isa() has no effect); replaces the
// MOEQUANT_ISA limit. Not meant to be changed while kernels run on other threads.
MOEQUANT_API void set_isa_limit(Isa limit) noexcept;

// Every ISA usable on this machine, lowest first (always contains Isa::scalar).
MOEQUANT_API std::vector<Isa> available_isas();

MOEQUANT_API std::string_view isa_name(Isa isa) noexcept;
MOEQUANT_API std::optional<Isa> isa_from_name(std::string_view name) noexcept;

}  // namespace moequant
