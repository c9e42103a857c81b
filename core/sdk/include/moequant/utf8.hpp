// UTF-8 validation: the reference reader rejects a safetensors header that is not valid UTF-8
// before it parses any JSON (InvalidHeader), the tokenizer refuses such text, and
// printable_name() escapes the bytes that are not.
#pragma once

#include <moequant/export.hpp>

#include <cstddef>
#include <optional>
#include <string_view>

namespace moequant {

// Length of the well-formed UTF-8 sequence starting at text[at], with its code point in
// `code_point`; 0 when the bytes there are ill-formed (overlong forms, surrogates and code
// points above U+10FFFF are) or the text ends inside the sequence.
MOEQUANT_API std::size_t utf8_sequence(std::string_view text, std::size_t at, char32_t& code_point) noexcept;

// Offset of the first byte that does not start a well-formed UTF-8 sequence, or nullopt if all
// is valid.
MOEQUANT_API std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept;

}  // namespace moequant
