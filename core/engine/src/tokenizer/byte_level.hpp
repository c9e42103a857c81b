// GPT-2's byte-level alphabet: every byte is shown as one printable Unicode character (the
// printable Latin-1 bytes as themselves, the others as U+0100 upwards), so BPE works on bytes
// and a vocabulary needs no byte-fallback tokens.
#pragma once

#include <string>
#include <string_view>

namespace moequant::tokenization {

// The UTF-8 encoding of the character standing for each byte of `bytes`.
std::string to_byte_level(std::string_view bytes);

}  // namespace moequant::tokenization
