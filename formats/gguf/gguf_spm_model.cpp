#include "gguf_spm_model.hpp"

#include <moequant/error.hpp>
#include <moequant/input_file.hpp>
#include <moequant/printable.hpp>
#include <moequant/utf8.hpp>

#include <cstring>
#include <unordered_set>

namespace moequant::formats {
namespace {

// Real tokenizer.model files are a few MiB (Mistral's: 482 KiB; Gemma's: 4 MiB).
constexpr std::uint64_t spm_file_limit = 64ull << 20;

// Protobuf's wire types.
constexpr std::uint32_t wire_varint = 0, wire_fixed64 = 1, wire_bytes = 2, wire_fixed32 = 5;

class Cursor {
public:
    Cursor(std::string_view bytes, const std::filesystem::path& file) : data_(bytes), file_(file) {}

    bool done() const { return at_ == data_.size(); }

    std::uint64_t varint() {
        std::uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (at_ >= data_.size()) refuse("ends inside a varint");
            const auto byte = static_cast<std::uint8_t>(data_[at_++]);
            value |= std::uint64_t{byte & 0x7Fu} << shift;
            if (!(byte & 0x80u)) return value;
        }
        refuse("has a varint longer than 10 bytes");
    }

    std::string_view take(std::uint64_t length) {
        if (length > data_.size() - at_)
            refuse("has a " + std::to_string(length) + "-byte field where " + std::to_string(data_.size() - at_) + " bytes are left");
        const std::string_view out = data_.substr(at_, static_cast<std::size_t>(length));
        at_ += static_cast<std::size_t>(length);
        return out;
    }

    // A field of `wire` type that is not read: skipped.
    void skip(std::uint32_t wire) {
        switch (wire) {
            case wire_varint: varint(); break;
            case wire_fixed64: take(8); break;
            case wire_bytes: take(varint()); break;
            case wire_fixed32: take(4); break;
            default: refuse("has a field of wire type " + std::to_string(wire) + ", which sentencepiece models do not use");
        }
    }

    [[noreturn]] void refuse(const std::string& message) const {
        throw Error(ErrorKind::input, message + " (at byte " + std::to_string(at_) + "); it is no SentencePiece model",
                    {.file = file_.string(), .code = "BadSentencePieceModel"});
    }

private:
    std::string_view data_;
    const std::filesystem::path& file_;
    std::size_t at_ = 0;
};

SpmPiece parse_piece(Cursor& in) {
    SpmPiece out;
    while (!in.done()) {
        const std::uint64_t key = in.varint();
        const auto field = key >> 3;
        const auto wire = static_cast<std::uint32_t>(key & 7);
        if (field == 1 && wire == wire_bytes) {
            out.piece = std::string(in.take(in.varint()));
        } else if (field == 2 && wire == wire_fixed32) {
            const std::string_view bytes = in.take(4);
            std::uint32_t bits = 0;
            for (int i = 3; i >= 0; --i) bits = bits << 8 | static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]);
            std::memcpy(&out.score, &bits, 4);
        } else if (field == 3 && wire == wire_varint) {
            const std::uint64_t type = in.varint();
            if (type < 1 || type > 6) in.refuse("has a piece of type " + std::to_string(type) + ", not one of sentencepiece's 1-6");
            out.type = static_cast<SpmPieceType>(type);
        } else {
            in.skip(wire);
        }
    }
    return out;
}

}  // namespace

std::vector<SpmPiece> parse_spm_model(std::string_view bytes, const std::filesystem::path& file, std::size_t max_pieces) {
    Cursor in(bytes, file);
    std::vector<SpmPiece> pieces;
    std::unordered_set<std::string_view> seen;
    while (!in.done()) {
        const std::uint64_t key = in.varint();
        const auto wire = static_cast<std::uint32_t>(key & 7);
        if (key >> 3 != 1 || wire != wire_bytes) {
            in.skip(wire);
            continue;
        }
        if (pieces.size() == max_pieces) in.refuse("has more than " + std::to_string(max_pieces) + " pieces");
        Cursor message(in.take(in.varint()), file);
        pieces.push_back(parse_piece(message));
    }
    // sentencepiece's own checks when it loads a model.
    for (std::size_t id = 0; id < pieces.size(); ++id) {
        const std::string& piece = pieces[id].piece;
        auto refuse = [&](const std::string& what) {
            throw Error(ErrorKind::input, "piece " + std::to_string(id) + " " + what,
                        {.file = file.string(), .code = "BadSentencePieceModel"});
        };
        if (piece.empty()) refuse("is empty");
        if (find_invalid_utf8(piece)) refuse("is not valid UTF-8");
        if (!seen.insert(piece).second) refuse("'" + printable_name(piece) + "' is defined twice");
    }
    if (pieces.empty()) throw Error(ErrorKind::input, "has no pieces", {.file = file.string(), .code = "BadSentencePieceModel"});
    return pieces;
}

std::vector<SpmPiece> read_spm_model(const std::filesystem::path& file, std::size_t max_pieces) {
    const std::string bytes = read_small_file(file, spm_file_limit);
    return parse_spm_model(bytes, file, max_pieces);
}

}  // namespace moequant::formats
