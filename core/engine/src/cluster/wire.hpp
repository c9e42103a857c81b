// What ranks send each other, as bytes: a layer's record for the run manifest and the quantized
// experts of a layer. Both ends run the same build, so the encoding is plain (little-endian
// fixed-width integers, sizes before contents); a reader still checks every size against what
// is left and throws Error(internal) on a short or malformed message.
#pragma once

#include <moequant/engine/run_manifest.hpp>
#include <moequant/output_format.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::detail {

class WireWriter {
public:
    void u64(std::uint64_t v);
    void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
    void text(std::string_view s);
    void bytes(const void* data, std::size_t n);
    std::string take() { return std::move(out_); }

private:
    std::string out_;
};

class WireReader {
public:
    explicit WireReader(std::string_view in) : in_(in) {}
    std::uint64_t u64();
    std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
    // A count of items of at least `least_bytes_each` bytes each: no more than what is left holds.
    std::uint64_t count(std::size_t least_bytes_each);
    std::string text();
    void bytes(void* data, std::size_t n);
    std::size_t left() const noexcept { return in_.size(); }
    bool done() const noexcept { return in_.empty(); }

private:
    std::string_view in_;
};

void write_layer_record(WireWriter& w, const ManifestLayer& layer);
ManifestLayer read_layer_record(WireReader& r);

void write_quantized_expert(WireWriter& w, std::int64_t expert, Projection projection, int part, const QuantizedTensor& tensor);
QuantizedExpert read_quantized_expert(WireReader& r);

}  // namespace moequant::detail
