#include "gguf_imatrix.hpp"

#include "gguf_container.hpp"

#include <moequant/digest.hpp>
#include <moequant/error.hpp>
#include <moequant/output_file.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace moequant::formats {

namespace fs = std::filesystem;

namespace {

constexpr char gguf_magic[4] = {'G', 'G', 'U', 'F'};
constexpr std::int64_t max_legacy_name = 4096;  // GGUF names are at most 63 bytes; anything near this is not a name
constexpr std::size_t values_per_read = 1 << 16;

[[noreturn]] void refuse(const fs::path& file, const std::string& what, std::string code = "BadImatrix") {
    throw Error(ErrorKind::input, "importance matrix " + file.string() + ": " + what,
                {.code = std::move(code), .hint = "give a file written by llama.cpp's llama-imatrix (GGUF or legacy .dat)"});
}

std::int32_t read_i32(const InputFile& file, std::uint64_t& at) {
    if (at + 4 > file.size()) refuse(file.path(), "ends at byte " + std::to_string(file.size()) + " inside an entry");
    std::int32_t v = 0;
    file.read_at(&v, 4, at);
    at += 4;
    return v;
}

std::vector<float> read_floats(const InputFile& file, std::uint64_t offset, std::size_t count) {
    std::vector<float> out(count);
    if (count) file.read_at(out.data(), count * 4, offset);
    return out;
}

// The F32 tensor `name` of an imatrix GGUF, with at most two dims.
const GgufTensorInfo& f32_tensor(const GgufFile& header, const fs::path& path, const std::string& name) {
    const GgufTensorInfo* t = header.tensor(name);
    if (!t) refuse(path, "has " + name.substr(0, name.rfind('.')) + ".in_sum2 without " + name);
    if (t->type != 0 || t->ne.size() > 2)
        refuse(path, "tensor " + name + " is not a 1- or 2-D F32 tensor");
    return *t;
}

}  // namespace

ImatrixFile ImatrixFile::open(const fs::path& path) {
    InputFile file = InputFile::open(path);
    char magic[4] = {};
    if (file.size() >= 4) file.read_at(magic, 4, 0);
    ImatrixFile imatrix = std::memcmp(magic, gguf_magic, 4) == 0 ? open_gguf(std::move(file)) : open_legacy(std::move(file));
    if (imatrix.entries_.empty()) refuse(path, "holds no entry");
    return imatrix;
}

ImatrixFile ImatrixFile::open_gguf(InputFile file) {
    ImatrixFile imatrix;
    const fs::path path = file.path();
    const GgufFile header = read_gguf_file_header(path.string());
    if (const GgufValue* type = header.find("general.type"); type && type->as_string() != "imatrix")
        refuse(path, "is a GGUF of general.type '" + type->as_string().value_or("?") + "', not an importance matrix", "NotImatrix");
    // llama-quantize requires the three keys.
    const GgufValue* datasets = header.find("imatrix.datasets");
    const GgufValue* chunks = header.find("imatrix.chunk_count");
    const GgufValue* chunk_size = header.find("imatrix.chunk_size");
    if (!datasets || !datasets->as_strings() || !chunks || !chunks->as_unsigned() || !chunk_size || !chunk_size->as_unsigned())
        refuse(path, "lacks imatrix.datasets (strings), imatrix.chunk_count or imatrix.chunk_size (unsigned)", "NotImatrix");
    imatrix.datasets_ = *datasets->as_strings();
    imatrix.chunk_count_ = static_cast<std::int64_t>(std::min<std::uint64_t>(*chunks->as_unsigned(), INT32_MAX));
    constexpr std::string_view sums_suffix = ".in_sum2", counts_suffix = ".counts";
    for (const auto& t : header.tensors) {
        const bool counts = t.name.ends_with(counts_suffix);
        if (!t.name.ends_with(sums_suffix) && !counts) continue;  // .in_sum and others: llama-quantize reads neither
        const std::string weight = t.name.substr(0, t.name.size() - (counts ? counts_suffix : sums_suffix).size());
        const GgufTensorInfo& sums = f32_tensor(header, path, weight + std::string(sums_suffix));
        const GgufTensorInfo& count = f32_tensor(header, path, weight + std::string(counts_suffix));
        if (counts) continue;  // each pair is taken at its sums
        ImatrixEntry e;
        e.name = weight;
        e.cols = sums.ne[0];
        e.matrices = sums.ne.size() > 1 ? sums.ne[1] : 1;
        const std::int64_t count_values = count.ne[0] * (count.ne.size() > 1 ? count.ne[1] : 1);
        if (count_values != e.matrices)
            refuse(path, weight + ".counts holds " + std::to_string(count_values) + " counts for " + std::to_string(e.matrices) +
                             " matrices of " + weight + ".in_sum2");
        e.values_offset = sums.offset;
        e.counts_offset = count.offset;
        imatrix.entries_.emplace(e.name, e);
    }
    imatrix.file_ = std::move(file);
    imatrix.form_ = Form::gguf;
    return imatrix;
}

ImatrixFile ImatrixFile::open_legacy(InputFile file) {
    ImatrixFile imatrix;
    const fs::path path = file.path();
    std::uint64_t at = 0;
    const std::int32_t n = read_i32(file, at);
    if (n < 1 || static_cast<std::uint64_t>(n) > file.size() / 16)
        refuse(path, "is neither a GGUF nor a legacy imatrix: its entry count " + std::to_string(n) + " does not fit its " +
                         std::to_string(file.size()) + " bytes");
    for (std::int32_t i = 0; i < n; ++i) {
        const std::string which = "entry " + std::to_string(i + 1) + " of " + std::to_string(n);
        const std::int32_t length = read_i32(file, at);
        if (length < 1 || length > max_legacy_name || at + static_cast<std::uint64_t>(length) > file.size())
            refuse(path, which + " has a name of " + std::to_string(length) + " bytes");
        ImatrixEntry e;
        e.name.resize(static_cast<std::size_t>(length));
        file.read_at(e.name.data(), e.name.size(), at);
        at += static_cast<std::uint64_t>(length);
        e.name = e.name.substr(0, e.name.find('\0'));  // llama-quantize reads the name as a C string
        e.ncall = read_i32(file, at);
        const std::int32_t values = read_i32(file, at);
        if (values < 1 || at + 4 * static_cast<std::uint64_t>(values) > file.size())
            refuse(path, which + " (" + e.name.substr(0, 80) + ") has " + std::to_string(values) + " values, past the file's end");
        e.cols = values;  // the tensor's row length decides how they split into experts
        e.values_offset = at;
        at += 4 * static_cast<std::uint64_t>(values);
        if (!imatrix.entries_.emplace(e.name, e).second) refuse(path, which + " repeats the name " + e.name.substr(0, 80));
    }
    if (at < file.size()) {  // the trailer: chunks, then the dataset's name
        const std::int32_t chunks = read_i32(file, at);
        const std::int32_t length = read_i32(file, at);
        if (length < 0 || at + static_cast<std::uint64_t>(length) > file.size())
            refuse(path, "its trailer names a dataset of " + std::to_string(length) + " bytes, past the file's end");
        std::string dataset(static_cast<std::size_t>(length), '\0');
        if (length) file.read_at(dataset.data(), dataset.size(), at);
        imatrix.datasets_ = {dataset};
        imatrix.chunk_count_ = std::max(0, chunks);
    }
    imatrix.file_ = std::move(file);
    imatrix.form_ = Form::legacy;
    return imatrix;
}

const ImatrixEntry* ImatrixFile::find(std::string_view name) const {
    const auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
}

ColumnImportance ImatrixFile::matrix(const ImatrixEntry& e, std::int64_t index) const {
    if (index < 0 || index >= e.matrices)
        throw Error(ErrorKind::internal, "matrix " + std::to_string(index) + " of importance entry " + e.name);
    ColumnImportance out;
    out.weights = read_floats(file_, e.values_offset + 4 * static_cast<std::uint64_t>(index * e.cols), static_cast<std::size_t>(e.cols));
    if (form_ == Form::legacy) {
        if (e.ncall > 0)
            for (float& v : out.weights) v /= static_cast<float>(e.ncall);
        return out;
    }
    // Each value over the count of its group in the file (llama-quantize's sums[j*ne0+i] / counts[j]).
    const std::int64_t per_count = e.values_per_count > 0 ? e.values_per_count : e.cols;
    std::optional<std::int64_t> tokens;
    for (std::int64_t j = 0; j < e.cols;) {
        const std::int64_t at = index * e.cols + j, group = at / per_count, end = std::min(e.cols, (group + 1) * per_count - index * e.cols);
        float count = 0;
        file_.read_at(&count, 4, e.counts_offset + 4 * static_cast<std::uint64_t>(group));
        const auto first = out.weights.begin() + j, last = out.weights.begin() + end;
        std::int64_t seen = 0;
        if (count > 0.0f) {
            std::for_each(first, last, [&](float& v) { v /= count; });
            seen = std::isfinite(count) ? static_cast<std::int64_t>(std::min(count, 9.0e18f)) : -1;
        } else {
            std::fill(first, last, 1.0f);  // llama.cpp: an expert that saw no token weighs 1
        }
        tokens = tokens ? std::min(*tokens, seen) : seen;
        j = end;
    }
    out.tokens = tokens.value_or(0);
    return out;
}

std::vector<float> ImatrixFile::weights(const ImatrixEntry& e) const {
    std::vector<float> out;
    out.reserve(static_cast<std::size_t>(e.cols * e.matrices));
    for (std::int64_t m = 0; m < e.matrices; ++m) {
        const ColumnImportance one = matrix(e, m);
        out.insert(out.end(), one.weights.begin(), one.weights.end());
    }
    return out;
}

std::optional<ImatrixEntry> ImatrixFile::entry_for(const std::string& name, std::int64_t cols, std::int64_t matrices) const {
    const ImatrixEntry* e = find(name);
    if (!e) return std::nullopt;
    if (e->cols * e->matrices != cols * matrices) {
        if (name == "token_embd.weight") return std::nullopt;  // llama-quantize's one exception
        refuse(path(), "entry " + name + " holds " + std::to_string(e->cols * e->matrices) + " values; the tensor needs " +
                           std::to_string(cols) + " per matrix x " + std::to_string(matrices) + " matrices",
               "ImatrixSizeMismatch");
    }
    // The values split into the tensor's matrices, as llama-quantize hands them to ggml: a legacy
    // entry has no grouping of its own; a GGUF one keeps its counts' (values_per_count).
    ImatrixEntry shaped = *e;
    if (form_ == Form::gguf && e->cols != cols) shaped.values_per_count = e->values_per_count > 0 ? e->values_per_count : e->cols;
    shaped.cols = cols;
    shaped.matrices = matrices;
    return shaped;
}

// llama-quantize refuses an imatrix with a non-finite weight before it quantizes anything.
void ImatrixFile::check_contents() {
    for (const auto& [name, e] : entries_) {
        const std::int64_t per_read = std::max<std::int64_t>(1, static_cast<std::int64_t>(values_per_read) / e.cols);
        for (std::int64_t m = 0; m < e.matrices; m += per_read) {
            for (std::int64_t k = m; k < std::min(e.matrices, m + per_read); ++k) {
                const ColumnImportance one = matrix(e, k);
                const auto bad = std::find_if(one.weights.begin(), one.weights.end(), [](float v) { return !std::isfinite(v); });
                if (bad != one.weights.end())
                    refuse(path(), "entry " + name + " has a non-finite weight at matrix " + std::to_string(k) + ", column " +
                                       std::to_string(bad - one.weights.begin()),
                           "NonFiniteImatrix");
            }
        }
    }
    digest_ = file_digest(path());
}

namespace {

std::vector<const ImatrixWeightView*> sorted_weights(const ImatrixWeights& weights) {
    std::vector<const ImatrixWeightView*> out;
    for (const auto& w : weights.weights) {
        if (w.cols < 1 || w.counts.empty() || !w.read)
            throw Error(ErrorKind::usage, "importance statistics of " + w.name + ": no matrices of " + std::to_string(w.cols) + " values");
        out.push_back(&w);
    }
    std::sort(out.begin(), out.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
    return out;
}

std::span<const std::byte> float_bytes(std::span<const float> v) { return std::as_bytes(v); }

// One matrix of sums at a time into `file` at `offset`.
void write_matrices(OutputFile& file, std::uint64_t offset, const ImatrixWeightView& w, bool input) {
    std::vector<float> row(static_cast<std::size_t>(w.cols));
    for (std::size_t m = 0; m < w.counts.size(); ++m) {
        w.read(static_cast<std::int64_t>(m), input, row);
        file.write_at(offset + m * row.size() * 4, float_bytes(row));
    }
}

}  // namespace

ImatrixWeights view_of(const ImatrixRecord& record) {
    ImatrixWeights out{.datasets = record.datasets, .chunk_count = record.chunk_count, .chunk_size = record.chunk_size};
    for (const ImatrixStatistics& w : record.weights) {
        if (w.cols < 1 || w.counts.empty() || w.sums.size() != static_cast<std::size_t>(w.cols) * w.counts.size())
            throw Error(ErrorKind::usage, "importance statistics of " + w.name + ": " + std::to_string(w.sums.size()) +
                                              " sums do not fill " + std::to_string(w.counts.size()) + " matrices of " +
                                              std::to_string(w.cols));
        if (!w.input_sums.empty() && w.input_sums.size() != w.sums.size())
            throw Error(ErrorKind::usage, "importance statistics of " + w.name + ": " + std::to_string(w.input_sums.size()) +
                                              " input sums for " + std::to_string(w.sums.size()) + " sums of squares");
        out.weights.push_back({.name = w.name, .cols = w.cols, .counts = w.counts, .has_input_sums = !w.input_sums.empty(),
                               .read = [&w](std::int64_t m, bool input, std::span<float> row) {
                                   const std::vector<float>& from = input ? w.input_sums : w.sums;
                                   std::copy_n(from.begin() + m * w.cols, row.size(), row.begin());
                               }});
    }
    return out;
}

void write_imatrix_gguf(const fs::path& path, const ImatrixWeights& record) {
    const std::vector<const ImatrixWeightView*> weights = sorted_weights(record);
    std::vector<GgufKeyValue> kv{{"general.type", GgufValue::string("imatrix")},
                                 {"imatrix.datasets", GgufValue::strings(record.datasets)},
                                 {"imatrix.chunk_count", GgufValue::u32(record.chunk_count)},
                                 {"imatrix.chunk_size", GgufValue::u32(record.chunk_size)}};
    // Per weight, in llama-imatrix's order: in_sum2, counts, then in_sum when collected.
    enum class Part { sums, counts, input_sums };
    std::vector<GgufTensorInfo> infos;
    std::vector<std::pair<const ImatrixWeightView*, Part>> parts;
    for (const auto* w : weights) {
        const auto matrices = static_cast<std::int64_t>(w->counts.size());
        const std::uint64_t bytes = static_cast<std::uint64_t>(w->cols) * w->counts.size() * 4;
        infos.push_back({.name = w->name + ".in_sum2", .ne = {w->cols, matrices}, .type = 0, .bytes = bytes});
        parts.emplace_back(w, Part::sums);
        infos.push_back({.name = w->name + ".counts", .ne = {1, matrices}, .type = 0, .bytes = w->counts.size() * 4});
        parts.emplace_back(w, Part::counts);
        if (!w->has_input_sums) continue;
        infos.push_back({.name = w->name + ".in_sum", .ne = {w->cols, matrices}, .type = 0, .bytes = bytes});
        parts.emplace_back(w, Part::input_sums);
    }
    const GgufLayout layout = lay_out_gguf(kv, infos);
    OutputFile file(path, layout.file_size);
    file.write_at(0, std::as_bytes(std::span<const char>(layout.header.data(), layout.header.size())));
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const auto& [w, part] = parts[i];
        if (part == Part::counts) file.write_at(layout.tensors[i].offset, float_bytes(w->counts));
        else write_matrices(file, layout.tensors[i].offset, *w, part == Part::input_sums);
    }
    const std::uint64_t end = layout.tensors.empty() ? layout.header.size() : layout.tensors.back().offset + layout.tensors.back().bytes;
    if (end < layout.file_size) file.write_at(end, std::vector<std::byte>(layout.file_size - end));
    file.commit();
}

void write_imatrix_gguf(const fs::path& path, const ImatrixRecord& record) { write_imatrix_gguf(path, view_of(record)); }

void write_imatrix_legacy(const fs::path& path, const ImatrixWeights& record) {
    if (record.chunk_size == 0) throw Error(ErrorKind::usage, "a legacy imatrix needs the chunk size its ncall counts in");
    std::vector<const ImatrixWeightView*> kept;
    for (const auto* w : sorted_weights(record))
        if (std::any_of(w->counts.begin(), w->counts.end(), [](float c) { return c > 0; })) kept.push_back(w);
    const std::string dataset = record.datasets.empty() ? std::string() : record.datasets.front();
    std::uint64_t size = 4 + 8 + dataset.size();
    for (const auto* w : kept) size += 12 + w->name.size() + static_cast<std::uint64_t>(w->cols) * w->counts.size() * 4;
    OutputFile file(path, size);
    auto put = [&](std::int32_t v) { file.append(std::as_bytes(std::span<const std::int32_t>(&v, 1))); };
    put(static_cast<std::int32_t>(kept.size()));
    std::vector<float> row;
    for (const auto* w : kept) {
        put(static_cast<std::int32_t>(w->name.size()));
        file.append(w->name);
        const float most = *std::max_element(w->counts.begin(), w->counts.end());
        const auto ncall = static_cast<std::int32_t>(std::ceil(most / static_cast<float>(record.chunk_size)));
        put(ncall);
        put(static_cast<std::int32_t>(static_cast<std::uint64_t>(w->cols) * w->counts.size()));
        row.resize(static_cast<std::size_t>(w->cols));
        for (std::size_t m = 0; m < w->counts.size(); ++m) {
            w->read(static_cast<std::int64_t>(m), false, row);
            for (float& v : row) v = (w->counts[m] > 0 ? v / w->counts[m] : 1.0f) * static_cast<float>(ncall);
            file.append(float_bytes(row));
        }
    }
    put(static_cast<std::int32_t>(record.chunk_count));
    put(static_cast<std::int32_t>(dataset.size()));
    file.append(dataset);
    file.commit();
}

void write_imatrix_legacy(const fs::path& path, const ImatrixRecord& record) { write_imatrix_legacy(path, view_of(record)); }

std::string ImatrixFile::identity() const {
    return path().filename().string() + " (" + (form_ == Form::gguf ? "GGUF" : "legacy") + " imatrix, " +
           std::to_string(file_.size()) + " bytes, digest " + digest_ + ")";
}

}  // namespace moequant::formats
