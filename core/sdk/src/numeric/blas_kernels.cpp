#include <moequant/blas_kernels.hpp>

#include <moequant/cpu_isa.hpp>

#include <cstdlib>
#include <string>
#include <string_view>

// BLIS's own entry points (blis.h is large and arch_t a C enum; these three are all we need).
extern "C" void bli_init(void);
extern "C" int bli_arch_query_id(void);
extern "C" const char* bli_arch_string(int id);
extern "C" const char* bli_info_get_version_str(void);

namespace moequant {
namespace {

enum class ChosenBy { moequant, user, blis };

// BLIS numbers its kernel sets in an enum whose order changes between versions, ending with
// "generic"; the id of a name is found by asking BLIS (a table lookup, no initialisation).
int blis_arch_id(std::string_view name) {
    for (int id = 0; id < 64; ++id) {
        const std::string_view arch = bli_arch_string(id);
        if (arch == name) return id;
        if (arch == "generic") break;
    }
    return -1;
}

// BLIS reads BLIS_ARCH_TYPE once, at its first call; this runs while the SDK is loaded, before
// any product (the variable also reaches child processes, which then choose the same).
ChosenBy choose_blis_kernels() {
    if (const char* set = std::getenv("BLIS_ARCH_TYPE"); set != nullptr && *set != '\0') return ChosenBy::user;
    if (detected_isa() < Isa::avx512) return ChosenBy::blis;
    const int skx = blis_arch_id("skx");
    if (skx < 0) return ChosenBy::blis;
    setenv("BLIS_ARCH_TYPE", std::to_string(skx).c_str(), 0);
    return ChosenBy::moequant;
}

const ChosenBy chosen_by = choose_blis_kernels();

}  // namespace

std::string blas_kernels() {
    bli_init();  // idempotent; BLIS answers which kernels it runs only once initialised
    return std::string("BLIS ") + bli_info_get_version_str() + " " + bli_arch_string(bli_arch_query_id());
}

std::string blas_kernels_chosen_by() {
    switch (chosen_by) {
        case ChosenBy::moequant: return "moequant, for AVX-512";
        case ChosenBy::user: return "BLIS_ARCH_TYPE";
        case ChosenBy::blis: return "BLIS, for this CPU model";
    }
    return {};
}

}  // namespace moequant
