// Calibration samples from text (moequant gptq --dataset): a local JSONL file, or a folder of
// them by split, one object per line with "text" (a string) or chat "messages" ([{"role",
// "content"}], rendered with the family's ChatTemplate), optionally a "split". Like llm-compressor's examples, the rows are shuffled with a seed, the
// first num_samples kept, and each is tokenized without special tokens (the template brings its
// own) and truncated to max_sequence_length. Without a file, the embedded public-domain text
// serves, one sample per paragraph, so the demo runs offline.
#pragma once

#include <moequant/chat_template.hpp>
#include <moequant/engine/tokenizer.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace moequant {

struct DatasetSelection {
    std::int64_t num_samples = 512;           // --num_calibration_samples (<= 0: all rows)
    std::int64_t max_sequence_length = 2048;  // --max_sequence_length (<= 0: no limit)
    std::uint64_t seed = 42;                  // --random_seed
    // --dataset_split: the split a dataset folder's files are chosen by and a row's "split"
    // field must equal; empty: every row. Rows without a "split" field belong to every split.
    std::string split = "train_sft";  // the seed tool's default
};

struct CalibrationSamples {
    std::vector<std::vector<std::int32_t>> samples;  // token ids, in shuffled order
    std::int64_t rows = 0;       // rows (or paragraphs) available
    std::int64_t empty = 0;      // selected rows that gave no token (left out)
    std::int64_t truncated = 0;  // samples cut at max_sequence_length
    std::int64_t tokens() const noexcept;
};

// The files a --dataset path holds for `split` (the seed tool's load_dataset(dir, split=...) on
// a local folder): a file is itself; a folder gives DIR/<split>.jsonl, else every .jsonl/.json
// file below it (hidden folders aside) named <split>, <split>-* or <split>.* or lying in a
// folder named <split> — a Hugging Face dataset repository's data-file naming — in path order.
// Error(input, "BadDataset") naming the folder and the splits it seems to hold when none
// exists; anything that is not a folder is returned as the one file. A split's file that is not a
// regular file (a FIFO, a link to a device, a folder) is returned too, for the reader to refuse
// by name (NotARegularFile). A file holds JSON lines, or one JSON array of rows.
std::vector<std::filesystem::path> dataset_split_files(const std::filesystem::path& dataset,
                                                                    const std::string& split);

// Reads the rows of `dataset` (a file or folder, dataset_split_files) of the selection's split.
// Error(input, "BadDataset") naming the file and line for a row that is not a JSON object with a
// string "text" or a well-formed "messages" list (or a "split" that is not a string), when rows
// name splits but none is the one asked for, or when no row gives a token.
CalibrationSamples load_calibration_dataset(const std::filesystem::path& dataset, const Tokenizer& tokenizer,
                                                         const ChatTemplate& chat, const DatasetSelection& selection);

// `texts` as rows (shuffled, selected, tokenized and truncated the same way).
CalibrationSamples tokenize_calibration_texts(std::vector<std::string> texts, const Tokenizer& tokenizer,
                                                           const DatasetSelection& selection);

// A digest of every sample's token ids (and where each ends): which calibration data a run used.
std::string token_ids_digest(const std::vector<std::vector<std::int32_t>>& samples);

// The paragraphs of the SDK's embedded text (<moequant/embedded_text.hpp>).
std::vector<std::string> embedded_calibration_paragraphs();

}  // namespace moequant
