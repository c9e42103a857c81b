// --dataset values that name a Hugging Face Hub dataset ("HuggingFaceH4/ultrachat_200k", the
// seed tool's default) rather than a local path. moequant never goes online: such a dataset is
// read from the local Hugging Face cache when a download left JSON/JSONL files there, and
// refused otherwise with a way to export one.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace moequant::cli {

// True for "owner/name" with the Hub's characters (letters, digits, '-', '_', '.'), no "..".
bool looks_like_hub_dataset_id(const std::string& value);

// The Hub cache folder: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
// else ~/.cache/huggingface/hub (huggingface_hub's own order).
std::filesystem::path hub_cache_folder();

// A Hub id that is no local path: the cache snapshot folder holding it (refs/main's snapshot,
// else the only one) when it has JSON/JSONL files, which dataset_split_files then reads like a
// local clone of the repository; nullopt otherwise, and for anything else.
std::optional<std::filesystem::path> cached_hub_dataset(const std::string& dataset);

// Where to read a --dataset (not "embedded") from: cached_hub_dataset's folder, else the value
// as a path. Error(input, "DatasetNotLocal") for a Hub id the cache holds no JSON/JSONL copy
// of, with the `datasets` one-liner that exports `split` to JSONL.
std::filesystem::path dataset_path(const std::string& dataset, const std::string& split);

}  // namespace moequant::cli
