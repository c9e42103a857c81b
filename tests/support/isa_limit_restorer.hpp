// Tests that switch the kernel ISA put the previous limit back when they end, whatever happened.
#pragma once

#include <moequant/cpu_isa.hpp>

namespace moequant::test {

class IsaLimitRestorer {
public:
    IsaLimitRestorer() : saved_(active_isa()) {}
    ~IsaLimitRestorer() { set_isa_limit(saved_); }
    IsaLimitRestorer(const IsaLimitRestorer&) = delete;
    IsaLimitRestorer& operator=(const IsaLimitRestorer&) = delete;

private:
    Isa saved_;
};

}  // namespace moequant::test
