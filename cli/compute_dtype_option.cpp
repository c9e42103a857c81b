#include "compute_dtype_option.hpp"

#include <moequant/error.hpp>
#include <moequant/printable.hpp>

namespace moequant::cli {

ComputeDtype calibration_compute_dtype() noexcept { return cpu_has_bf16_products() ? ComputeDtype::bf16 : ComputeDtype::f32; }

void add_compute_dtype_option(boost::program_options::options_description& description, std::string& value,
                              const char* default_text) {
    description.add_options()("compute-dtype", boost::program_options::value(&value)->value_name("bf16|f32"),
                              default_text);
}

std::string apply_compute_dtype(const std::string& value, ComputeDtype fallback) {
    ComputeDtype dtype = fallback;
    if (!value.empty()) {
        const auto named = compute_dtype_from_name(value);
        if (!named)
            throw_usage_error("--compute-dtype '" + printable_name(value) + "' is not supported",
                              {.code = "BadOption", .hint = "use bf16 or f32"});
        dtype = *named;
    }
    set_compute_dtype(dtype);
    return dtype == ComputeDtype::bf16 ? "matrix products in BF16 with FP32 accumulation (oneDNN, " + bf16_product_isa() + ")"
                                       : std::string("matrix products in FP32");
}

}  // namespace moequant::cli
