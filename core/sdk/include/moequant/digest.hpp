// A fast 64-bit digest of bytes, for recognising outputs and inputs between runs (the run
// manifest records one per written file). Not cryptographic: it detects accidental change, not
// tampering. The value does not depend on how the bytes are split across update() calls.
#pragma once

#include <moequant/export.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace moequant {

class MOEQUANT_API Digest64 {
public:
    void update(std::span<const std::byte> bytes) noexcept;
    void update(std::string_view text) noexcept;
    std::uint64_t value() const noexcept;
    // 16 lowercase hex digits.
    std::string hex() const;

private:
    void mix_word(std::uint64_t word) noexcept;
    std::uint64_t state_ = 0x243F6A8885A308D3ull;
    std::uint64_t length_ = 0;
    std::uint64_t pending_ = 0;  // bytes of an unfinished 8-byte word
    unsigned pending_count_ = 0;
};

MOEQUANT_API std::string digest_hex(std::span<const std::byte> bytes);

// Digest64 of a whole file's bytes (read in chunks); Error(io) if it cannot be read.
MOEQUANT_API std::string file_digest(const std::filesystem::path& file);

}  // namespace moequant
