// The pieces of a SentencePiece tokenizer.model (sentencepiece_model.proto: ModelProto field 1,
// repeated SentencePiece {1 piece, 2 score, 3 type}), read without protobuf or sentencepiece:
// every length is checked against what is left before it is used, and the other fields
// (trainer_spec, normalizer_spec, …) are skipped by their wire type.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::formats {

// sentencepiece's SentencePiece.Type.
enum class SpmPieceType : std::int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

struct SpmPiece {
    std::string piece;
    float score = 0.0f;
    SpmPieceType type = SpmPieceType::normal;
};

// The pieces in id order. Error(input) naming `file` for a truncated or malformed message, a
// piece that is empty, repeated or not UTF-8, an unknown type, or more than `max_pieces`.
std::vector<SpmPiece> parse_spm_model(std::string_view bytes, const std::filesystem::path& file, std::size_t max_pieces);
std::vector<SpmPiece> read_spm_model(const std::filesystem::path& file, std::size_t max_pieces);

}  // namespace moequant::formats
