#include "compute_dtype_option.hpp"

#include <moequant/error.hpp>
#include <moequant/printable.hpp>

namespace moequant::cli {

ComputeDtype calibration_compute_dtype() {
    return cpu_has_bf16_products() && bf16_products_available() ? ComputeDtype::bf16 : ComputeDtype::f32;
}

ComputeDtype chosen_compute_dtype(const std::string& value, ComputeDtype fallback) {
    if (value.empty()) return fallback;
    const auto named = compute_dtype_from_name(value);
    if (!named)
        throw_usage_error("--compute-dtype '" + printable_name(value) + "' is not supported", {.code = "BadOption", .hint = "use bf16 or f32"});
    if (*named == ComputeDtype::bf16 && !bf16_products_available())
        throw_usage_error("--compute-dtype bf16: this CPU has no AVX-512, which oneDNN's BF16 products need",
                          {.code = "BadOption", .hint = "use f32"});
    return *named;
}

void add_compute_dtype_option(boost::program_options::options_description& description, std::string& value,
                              const char* default_text) {
    description.add_options()("compute-dtype", boost::program_options::value(&value)->value_name("bf16|f32"),
                              default_text);
}

std::string apply_compute_dtype(const std::string& value, ComputeDtype fallback) {
    const ComputeDtype dtype = chosen_compute_dtype(value, fallback);
    set_compute_dtype(dtype);
    return dtype == ComputeDtype::bf16 ? "matrix products in BF16 with FP32 accumulation (oneDNN, " + bf16_product_isa() + ")"
                                       : std::string("matrix products in FP32");
}

}  // namespace moequant::cli
