// Checked arithmetic for counts and sizes taken from files: a shape product, a sum of sample
// lengths or an offset that does not fit in 64 bits is bad input (Error(input) with the
// caller's context), never a silent wrap.
#pragma once

#include <moequant/error.hpp>

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

namespace moequant {

// The two types counts and sizes are read as; both operands must have the same one.
template <typename T>
concept CheckedInteger = std::same_as<T, std::int64_t> || std::same_as<T, std::uint64_t>;

namespace detail {

template <CheckedInteger T>
[[noreturn]] void overflow(std::string_view what, T a, const char* op, T b, ErrorContext context) {
    if (context.code.empty()) context.code = "ValueOverflow";
    throw_input_error(std::string(what) + " overflows 64 bits (" + std::to_string(a) + " " + op + " " + std::to_string(b) + ")",
                      std::move(context));
}

}  // namespace detail

// a * b; `what` names the quantity in the error ("2 x moe_intermediate_size").
template <CheckedInteger T>
T checked_mul(T a, T b, std::string_view what, ErrorContext context = {}) {
    T r;
    if (__builtin_mul_overflow(a, b, &r)) detail::overflow(what, a, "x", b, std::move(context));
    return r;
}

// a + b, likewise.
template <CheckedInteger T>
T checked_add(T a, T b, std::string_view what, ErrorContext context = {}) {
    T r;
    if (__builtin_add_overflow(a, b, &r)) detail::overflow(what, a, "+", b, std::move(context));
    return r;
}

}  // namespace moequant
