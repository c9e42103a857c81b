// llama.cpp's importance matrix files, as llama-quantize --imatrix reads them (docs/gguf-imatrix.md):
// the GGUF form llama-imatrix writes today (general.type "imatrix"; per weight NAME.in_sum2, F32
// [cols, matrices] sums of squared inputs, and NAME.counts, F32 [1, matrices] tokens; the keys
// imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size) and the legacy .dat form (entries of
// name, ncall and values = mean square x ncall). Each matrix's column weights are computed as
// llama-quantize computes them: sum / count (1 where the count is 0) or value / ncall. The file is
// indexed and checked once (every weight finite, as llama-quantize requires); the values are read
// per matrix when it is quantized, so memory stays flat whatever the model.
#pragma once

#include <moequant/importance.hpp>
#include <moequant/input_file.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace moequant::formats {

// One weight's entry: `matrices` (its experts, 1 for a 2-D weight) of `cols` values each.
struct ImatrixEntry {
    std::string name;  // the GGUF weight name, e.g. blk.3.ffn_down_exps.weight
    std::int64_t cols = 0;
    std::int64_t matrices = 1;
    std::uint64_t values_offset = 0;  // F32 [matrices][cols]: GGUF sums, legacy means x ncall
    std::uint64_t counts_offset = 0;  // GGUF: F32 [matrices] tokens
    std::int32_t ncall = 0;           // legacy
    // GGUF: the values one count divides, when the file groups them otherwise than `cols` (a
    // 3-D weight multiplied by ggml_mul_mat, whose counts llama-imatrix merges into one when
    // they are equal); 0: `cols`.
    std::int64_t values_per_count = 0;
};

class ImatrixFile {
public:
    enum class Form { gguf, legacy };

    // Indexes the file (its header or entry list, no values); Error(input) naming it and what is
    // wrong (sizes past its end, missing keys, unpaired tensors, ...).
    static ImatrixFile open(const std::filesystem::path& path);
    // Reads every value: Error(input) for a non-finite weight, as llama-quantize refuses it; and
    // digests the file for identity(). Once, before the values are used.
    void check_contents();

    Form form() const noexcept { return form_; }
    const std::filesystem::path& path() const noexcept { return file_.path(); }
    const ImatrixEntry* find(std::string_view name) const;
    // The entry of tensor `name`, `matrices` matrices (experts) of rows of `cols`, as
    // llama-quantize slices it; nullopt when the file has none for it, or (token_embd only, as
    // llama-quantize) one of another size. Error(input) naming the entry when its size differs.
    std::optional<ImatrixEntry> entry_for(const std::string& name, std::int64_t cols, std::int64_t matrices) const;
    std::size_t entries() const noexcept { return entries_.size(); }
    const std::vector<std::string>& datasets() const noexcept { return datasets_; }
    std::int64_t chunk_count() const noexcept { return chunk_count_; }  // 0 when not recorded

    // Matrix `index` of `entry`: its column weights, and its tokens (GGUF; -1 for legacy files).
    ColumnImportance matrix(const ImatrixEntry& entry, std::int64_t index) const;
    // Every matrix of `entry`, matrix after matrix.
    std::vector<float> weights(const ImatrixEntry& entry) const;

    // "NAME (legacy imatrix, BYTES bytes, digest HEX)": what the run manifest records.
    std::string identity() const;

private:
    static ImatrixFile open_gguf(InputFile file);
    static ImatrixFile open_legacy(InputFile file);

    InputFile file_;
    Form form_ = Form::gguf;
    std::map<std::string, ImatrixEntry, std::less<>> entries_;
    std::vector<std::string> datasets_;
    std::int64_t chunk_count_ = 0;
    std::string digest_;
};

// One weight's statistics as llama-imatrix collects them: per matrix (expert), the sum of each
// input column's squares and the tokens it saw.
struct ImatrixStatistics {
    std::string name;            // the GGUF weight name
    std::int64_t cols = 0;
    std::vector<float> sums;     // [matrices][cols]
    std::vector<float> counts;   // [matrices]
    // [matrices][cols] sums of the inputs (NAME.in_sum, which llama-imatrix writes for its
    // statistics and llama-quantize ignores); empty: not written.
    std::vector<float> input_sums;
};

struct ImatrixRecord {
    std::vector<ImatrixStatistics> weights;
    std::vector<std::string> datasets;  // what the statistics were collected on
    std::uint32_t chunk_count = 0;      // chunks of `chunk_size` tokens
    std::uint32_t chunk_size = 0;
};

// One weight's statistics as the writers read them: its counts, and its sums a matrix at a time
// (so a writer holds one matrix, however large the record; RecordedImatrix keeps them on disk).
struct ImatrixWeightView {
    std::string name;  // the GGUF weight name
    std::int64_t cols = 0;
    std::vector<float> counts;  // [matrices]
    bool has_input_sums = false;
    // Matrix m's `cols` sums of squares (input = false) or input sums (input = true) into `out`.
    std::function<void(std::int64_t m, bool input, std::span<float> out)> read;
};

struct ImatrixWeights {
    std::vector<ImatrixWeightView> weights;
    std::vector<std::string> datasets;
    std::uint32_t chunk_count = 0;
    std::uint32_t chunk_size = 0;
};

// `record` as the writers read it (the views refer to it: it must outlive them).
ImatrixWeights view_of(const ImatrixRecord& record);

// Writes the GGUF form llama-imatrix writes (general.type "imatrix", NAME.in_sum2, NAME.counts
// and, when given, NAME.in_sum per weight, sorted by name), complete or not at all (OutputFile). Error(usage) for sizes that
// do not fit, Error(io) when it cannot be written.
void write_imatrix_gguf(const std::filesystem::path& path, const ImatrixWeights& weights);
void write_imatrix_gguf(const std::filesystem::path& path, const ImatrixRecord& record);
// Writes the legacy .dat form llama-imatrix writes with --output-format dat: per weight whose
// matrices saw any token, ncall = ceil(most tokens / chunk_size) and values = mean square x ncall
// (1 x ncall where a matrix saw none), sorted by name; then the chunk count and first dataset.
void write_imatrix_legacy(const std::filesystem::path& path, const ImatrixWeights& weights);
void write_imatrix_legacy(const std::filesystem::path& path, const ImatrixRecord& record);

}  // namespace moequant::formats
