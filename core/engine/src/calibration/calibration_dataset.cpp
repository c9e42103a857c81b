#include <moequant/digest.hpp>
#include <moequant/embedded_text.hpp>
#include <moequant/engine/calibration_dataset.hpp>
#include <moequant/error.hpp>
#include <moequant/input_file.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <span>

namespace moequant {

namespace json = boost::json;

namespace {

// `where`: "line N" of a JSON-lines file, "row N" of a file holding one JSON array.
[[noreturn]] void bad_row(const std::filesystem::path& file, const std::string& line, const std::string& what) {
    throw Error(ErrorKind::input, line + ": " + what, {.file = file.string(), .code = "BadDataset"});
}

// One row's text: "text", or "messages" rendered with the chat template.
std::string row_text(const json::value& row, const ChatTemplate& chat, const std::filesystem::path& file, const std::string& line) {
    if (!row.is_object()) bad_row(file, line, "is not a JSON object");
    const auto& o = row.get_object();
    if (const auto* text = o.if_contains("text")) {
        if (!text->is_string()) bad_row(file, line, "\"text\" is not a string");
        return std::string(text->get_string());
    }
    const auto* messages = o.if_contains("messages");
    if (!messages) bad_row(file, line, "has neither \"text\" nor \"messages\"");
    if (!messages->is_array() || messages->get_array().empty()) bad_row(file, line, "\"messages\" is not a non-empty list");
    std::vector<ChatMessage> conversation;
    for (const auto& m : messages->get_array()) {
        const auto* role = m.is_object() ? m.get_object().if_contains("role") : nullptr;
        const auto* content = m.is_object() ? m.get_object().if_contains("content") : nullptr;
        if (!role || !role->is_string() || !content || !content->is_string())
            bad_row(file, line, "a message is not {\"role\": string, \"content\": string}");
        conversation.push_back({std::string(role->get_string()), std::string(content->get_string())});
    }
    try {
        return chat.render(conversation);
    } catch (const Error& e) {
        bad_row(file, line, e.what());
    }
}

// The indices of `rows` in seeded shuffled order (Fisher-Yates with mt19937_64: the same on
// every platform, unlike std::shuffle), cut to the selection.
std::vector<std::size_t> selected_rows(std::size_t rows, const DatasetSelection& selection) {
    std::vector<std::size_t> order(rows);
    for (std::size_t i = 0; i < rows; ++i) order[i] = i;
    std::mt19937_64 rng(selection.seed);
    for (std::size_t i = rows; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
    return order;
}

template <class TextOf>
CalibrationSamples tokenize_rows(std::size_t rows, const TextOf& text_of, const Tokenizer& tokenizer,
                                 const DatasetSelection& selection) {
    CalibrationSamples out;
    out.rows = static_cast<std::int64_t>(rows);
    for (std::size_t row : selected_rows(rows, selection)) {
        if (selection.num_samples > 0 && static_cast<std::int64_t>(out.samples.size()) == selection.num_samples) break;
        std::vector<std::int32_t> ids = tokenizer.encode(text_of(row), false);
        if (ids.empty()) {
            ++out.empty;
            continue;
        }
        if (selection.max_sequence_length > 0 && static_cast<std::int64_t>(ids.size()) > selection.max_sequence_length) {
            ids.resize(static_cast<std::size_t>(selection.max_sequence_length));
            ++out.truncated;
        }
        out.samples.push_back(std::move(ids));
    }
    return out;
}

}  // namespace

std::int64_t CalibrationSamples::tokens() const noexcept {
    std::int64_t n = 0;
    for (const auto& s : samples) n += static_cast<std::int64_t>(s.size());
    return n;
}

std::vector<std::filesystem::path> dataset_split_files(const std::filesystem::path& dataset, const std::string& split) {
    namespace fs = std::filesystem;
    std::error_code ec;
    // Anything but a folder is read as a file, so that a missing one or a FIFO gets the file
    // reader's own refusal (NotFound, NotARegularFile).
    if (!fs::is_directory(dataset, ec)) return {dataset};
    auto bad = [&](const std::string& what, const std::string& hint = {}) {
        return Error(ErrorKind::input, what, {.file = dataset.string(), .code = "BadDataset", .hint = hint});
    };
    // A split name is one path component: no "..", no separators.
    if (split.empty() || split == "." || split == ".." || split.find('/') != std::string::npos)
        throw bad("'" + split + "' is not a split name", "--dataset_split names a split, e.g. train");
    // SPLIT.jsonl whatever it is (the reader refuses a FIFO, a device or a folder by name).
    if (fs::exists(fs::symlink_status(dataset / (split + ".jsonl"), ec))) return {dataset / (split + ".jsonl")};
    // Otherwise the data-file naming of a Hugging Face dataset repository (a local clone, or a
    // snapshot of the Hub cache): any .jsonl/.json file below the folder whose name is the split
    // or starts with it and '-' or '.' (data/train_sft-00000-of-00003.jsonl), or that lies in a
    // folder named after it. Hidden folders (.git, .cache) are not searched.
    std::vector<fs::path> files;
    std::set<std::string> splits;  // for the refusal: what the folder seems to hold
    auto split_of_name = [](const std::string& stem) { return stem.substr(0, stem.find_first_of("-.")); };
    fs::recursive_directory_iterator it(dataset, fs::directory_options::none, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const fs::path& p = it->path();
        if (p.filename().string().starts_with(".")) {
            if (it->is_directory(ec)) it.disable_recursion_pending();
            continue;
        }
        if (p.extension() != ".jsonl" && p.extension() != ".json") continue;
        const fs::path relative = p.lexically_relative(dataset);
        bool in_split_folder = false;
        for (const auto& part : relative.parent_path()) in_split_folder |= part == split;
        const std::string stem = p.stem().string();
        const bool regular = it->is_regular_file(ec);
        // A file of the split that is not a regular one (a FIFO, a link to a device, a folder)
        // is kept, so that the reader refuses it by name rather than the split losing rows.
        if (in_split_folder || stem == split || split_of_name(stem) == split) {
            if (!regular && it->is_directory(ec)) it.disable_recursion_pending();
            files.push_back(p);
        } else if (!regular)
            continue;
        else if (relative.has_parent_path() && *relative.begin() != "data")
            splits.insert(relative.begin()->string());
        else
            splits.insert(split_of_name(stem));
    }
    std::sort(files.begin(), files.end());
    if (!files.empty()) return files;
    std::string found;
    for (const auto& s : splits) found += (found.empty() ? "" : ", ") + s;
    throw bad("has no split '" + split + "' (no " + split + ".jsonl, no JSON/JSONL file named " + split + "-* or under a " + split +
                  " folder)",
              found.empty() ? "put the rows in " + split + ".jsonl in it" : "it holds: " + found + " (--dataset_split)");
}

CalibrationSamples load_calibration_dataset(const std::filesystem::path& dataset, const Tokenizer& tokenizer,
                                            const ChatTemplate& chat, const DatasetSelection& selection) {
    // Every row is checked and rendered up front: a bad line fails before any work.
    std::vector<std::string> texts;
    std::set<std::string> other_splits;  // named by rows, but not the one asked for
    for (const auto& jsonl : dataset_split_files(dataset, selection.split)) {
        const std::string content = read_small_file(jsonl, dataset_file_limit);
        auto take = [&](const json::value& row, const std::string& where) {
            const json::value* split = row.is_object() ? row.get_object().if_contains("split") : nullptr;
            if (split && !split->is_string()) bad_row(jsonl, where, "\"split\" is not a string");
            if (split && !selection.split.empty() && split->get_string() != selection.split) {
                other_splits.insert(std::string(split->get_string()));
                return;
            }
            texts.push_back(row_text(row, chat, jsonl, where));
        };
        // One JSON array of rows (what `datasets`' to_json(lines=False) writes), else JSON lines.
        const std::size_t first = content.find_first_not_of(" \t\r\n");
        if (first != std::string::npos && content[first] == '[') {
            boost::system::error_code ec;
            const json::value rows = json::parse(content, ec);
            if (ec) bad_row(jsonl, "the JSON array", "is not valid JSON: " + ec.message());
            std::int64_t number = 1;
            for (const json::value& row : rows.get_array()) take(row, "row " + std::to_string(number++));
            continue;
        }
        std::int64_t number = 1;  // of the line being read
        for (std::size_t at = 0; at < content.size(); ++number) {
            const std::size_t end = std::min(content.find('\n', at), content.size());
            std::string_view line(content.data() + at, end - at);
            at = end + 1;
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines
            boost::system::error_code ec;
            const json::value row = json::parse(line, ec);
            const std::string where = "line " + std::to_string(number);
            if (ec) bad_row(jsonl, where, "is not valid JSON: " + ec.message());
            take(row, where);
        }
    }
    if (texts.empty() && !other_splits.empty()) {
        std::string found;
        for (const auto& s : other_splits) found += (found.empty() ? "" : ", ") + s;
        throw Error(ErrorKind::input, "has no row of split '" + selection.split + "'",
                    {.file = dataset.string(), .code = "BadDataset", .hint = "its rows' splits: " + found + " (--dataset_split)"});
    }
    CalibrationSamples samples;
    try {
        samples = tokenize_calibration_texts(std::move(texts), tokenizer, selection);
    } catch (const Error& e) {
        throw e.with_context({.file = dataset.string()});
    }
    return samples;
}

CalibrationSamples tokenize_calibration_texts(std::vector<std::string> texts, const Tokenizer& tokenizer,
                                              const DatasetSelection& selection) {
    CalibrationSamples samples =
        tokenize_rows(texts.size(), [&](std::size_t i) -> const std::string& { return texts[i]; }, tokenizer, selection);
    if (samples.samples.empty())
        throw Error(ErrorKind::input, "the calibration data holds no text (" + std::to_string(samples.rows) + " rows)",
                    {.code = "BadDataset"});
    return samples;
}

std::string token_ids_digest(const std::vector<std::vector<std::int32_t>>& samples) {
    Digest64 digest;
    for (const auto& sample : samples) {
        digest.update(std::to_string(sample.size()) + ":");
        digest.update(std::as_bytes(std::span(sample)));
    }
    return digest.hex();
}

std::vector<std::string> embedded_calibration_paragraphs() {
    std::vector<std::string> paragraphs;
    const std::string_view text = embedded_calibration_text();
    std::size_t at = 0;
    while (at < text.size()) {
        std::size_t end = text.find("\n\n", at);
        if (end == std::string_view::npos) end = text.size();
        std::string p(text.substr(at, end - at));
        if (p.find_first_not_of(" \n") != std::string::npos) paragraphs.push_back(std::move(p));
        at = end + 2;
    }
    return paragraphs;
}

}  // namespace moequant
