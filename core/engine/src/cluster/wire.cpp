#include "cluster/wire.hpp"

#include <moequant/error.hpp>

#include <cstring>

namespace moequant::detail {

namespace {

[[noreturn]] void malformed() { throw Error(ErrorKind::internal, "a message from another rank is malformed"); }

void write_ints(WireWriter& w, const std::vector<std::int64_t>& v) {
    w.u64(v.size());
    for (std::int64_t x : v) w.i64(x);
}

std::vector<std::int64_t> read_ints(WireReader& r) {
    const std::uint64_t n = r.count(sizeof(std::uint64_t));
    std::vector<std::int64_t> v;
    for (std::uint64_t i = 0; i < n; ++i) v.push_back(r.i64());  // each read checks what is left
    return v;
}

}  // namespace

void WireWriter::u64(std::uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
void WireWriter::text(std::string_view s) {
    u64(s.size());
    out_.append(s);
}
void WireWriter::bytes(const void* data, std::size_t n) { out_.append(static_cast<const char*>(data), n); }

std::uint64_t WireReader::u64() {
    std::uint64_t v = 0;
    bytes(&v, sizeof v);
    return v;
}
std::uint64_t WireReader::count(std::size_t least_bytes_each) {
    const std::uint64_t n = u64();
    if (least_bytes_each > 0 && n > in_.size() / least_bytes_each) malformed();
    return n;
}

std::string WireReader::text() {
    const std::uint64_t n = u64();
    if (n > in_.size()) malformed();
    std::string s(in_.substr(0, n));
    in_.remove_prefix(n);
    return s;
}
void WireReader::bytes(void* data, std::size_t n) {
    if (n > in_.size()) malformed();
    std::memcpy(data, in_.data(), n);
    in_.remove_prefix(n);
}

void write_layer_record(WireWriter& w, const ManifestLayer& layer) {
    w.i64(layer.layer);
    w.u64(layer.files.size());
    for (const auto& f : layer.files) {
        w.text(f.name);
        w.u64(f.bytes);
        w.text(f.digest);
    }
    w.text(layer.source_digest);
    w.u64(layer.coverage ? 1 : 0);
    if (!layer.coverage) return;
    const LayerCoverage& c = *layer.coverage;
    w.i64(c.tokens);
    w.u64(c.routed_only ? 1 : 0);
    write_ints(w, c.tokens_per_expert);
    write_ints(w, c.experts);
    write_ints(w, c.fallback_experts);
}

ManifestLayer read_layer_record(WireReader& r) {
    ManifestLayer layer;
    layer.layer = r.i64();
    const std::uint64_t files = r.count(3 * sizeof(std::uint64_t));
    for (std::uint64_t i = 0; i < files; ++i) {
        ManifestFile f;
        f.name = r.text();
        f.bytes = r.u64();
        f.digest = r.text();
        layer.files.push_back(std::move(f));
    }
    layer.source_digest = r.text();
    if (r.u64() == 0) return layer;
    LayerCoverage c;
    c.tokens = r.i64();
    c.routed_only = r.u64() != 0;
    c.tokens_per_expert = read_ints(r);
    c.experts = read_ints(r);
    c.fallback_experts = read_ints(r);
    layer.coverage = std::move(c);
    return layer;
}

void write_quantized_expert(WireWriter& w, std::int64_t expert, Projection projection, int part, const QuantizedTensor& quantized) {
    w.i64(expert);
    w.u64(static_cast<std::uint64_t>(projection));
    w.i64(part);
    w.text(quantized.method);
    w.u64(quantized.unquantized ? 1 : 0);
    w.u64(quantized.parts.size());
    for (const auto& [name, tensor] : quantized.parts) {
        w.text(name);
        w.u64(static_cast<std::uint64_t>(tensor.dtype()));
        write_ints(w, tensor.shape());
        w.u64(tensor.size_bytes());
        w.bytes(tensor.data(), tensor.size_bytes());
    }
}

QuantizedExpert read_quantized_expert(WireReader& r) {
    QuantizedExpert part;
    part.expert = r.i64();
    const std::uint64_t projection = r.u64();
    if (projection >= expert_projections.size()) malformed();
    part.projection = static_cast<Projection>(projection);
    part.part = static_cast<int>(r.i64());
    part.tensor.method = r.text();
    part.tensor.unquantized = r.u64() != 0;
    const std::uint64_t n = r.count(1);
    for (std::uint64_t i = 0; i < n; ++i) {
        std::string name = r.text();
        const std::uint64_t dtype = r.u64();
        if (dtype >= static_cast<std::uint64_t>(dtype_count)) malformed();
        const std::vector<std::int64_t> shape = read_ints(r);
        const std::uint64_t size = r.u64();
        // The shape must fit the bytes that follow before anything is allocated for it.
        std::uint64_t elements = 1;
        for (std::int64_t d : shape) {
            if (d < 0 || (d > 0 && elements > (2 * size + 2) / static_cast<std::uint64_t>(d))) malformed();
            elements *= static_cast<std::uint64_t>(d);
        }
        if (size > r.left()) malformed();
        Tensor tensor = Tensor::uninitialized(static_cast<DType>(dtype), Shape(shape.begin(), shape.end()));
        if (size != tensor.size_bytes()) malformed();
        r.bytes(tensor.bytes().data(), tensor.size_bytes());
        part.tensor.parts.emplace_back(std::move(name), std::move(tensor));
    }
    return part;
}

}  // namespace moequant::detail
