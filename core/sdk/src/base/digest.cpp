#include <moequant/digest.hpp>
#include <moequant/error.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

namespace moequant {
namespace {

constexpr std::uint64_t k1 = 0x9E3779B97F4A7C15ull;
constexpr std::uint64_t k2 = 0xC2B2AE3D27D4EB4Full;

std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

}  // namespace

void Digest64::mix_word(std::uint64_t word) noexcept { state_ = rotl(state_ ^ (word * k1), 29) * k2; }

void Digest64::update(std::span<const std::byte> bytes) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    std::size_t n = bytes.size();
    length_ += n;
    while (n > 0 && pending_count_ != 0) {  // finish a word left open by the previous call
        pending_ |= static_cast<std::uint64_t>(*p++) << (8 * pending_count_);
        --n;
        if (++pending_count_ == 8) {
            mix_word(pending_);
            pending_ = 0;
            pending_count_ = 0;
        }
    }
    for (; n >= 8; p += 8, n -= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);  // little-endian words on every supported target
        mix_word(w);
    }
    for (; n > 0; --n) pending_ |= static_cast<std::uint64_t>(*p++) << (8 * pending_count_++);
}

void Digest64::update(std::string_view text) noexcept {
    update(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

std::uint64_t Digest64::value() const noexcept {
    std::uint64_t h = state_;
    if (pending_count_) h = rotl(h ^ (pending_ * k1), 29) * k2;
    h ^= length_;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 33);
}

std::string Digest64::hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(value()));
    return buf;
}

std::string file_digest(const std::filesystem::path& file) {
    std::FILE* f = std::fopen(file.c_str(), "rb");
    if (!f) throw Error(ErrorKind::io, "cannot read back a written file", {.file = file.string(), .code = "ReadFailed"});
    std::vector<std::byte> buffer(1u << 20);  // run_estimate.cpp counts it
    Digest64 d;
    std::size_t n;
    while ((n = std::fread(buffer.data(), 1, buffer.size(), f)) > 0) d.update(std::span<const std::byte>(buffer.data(), n));
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) throw Error(ErrorKind::io, "cannot read back a written file", {.file = file.string(), .code = "ReadFailed"});
    return d.hex();
}

std::string digest_hex(std::span<const std::byte> bytes) {
    Digest64 d;
    d.update(bytes);
    return d.hex();
}

}  // namespace moequant
