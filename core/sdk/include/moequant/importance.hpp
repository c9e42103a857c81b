// How much each input column of an expert matrix matters: llama.cpp's importance matrix (the
// mean square of each input over the calibration tokens a matrix saw), by which a quantizer
// with an importance facet (QuantizerImportance) weighs its rounding errors. A format reads it
// from a file in its own naming (the gguf format's --imatrix); the host asks it per matrix.
#pragma once

#include <moequant/export.hpp>
#include <moequant/projection.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace moequant {

// The importance of one expert matrix's input columns.
struct ColumnImportance {
    std::vector<float> weights;  // one per input column (cols of [rows, cols]); empty: none for this matrix
    // The tokens routed to the expert while the importance was measured; -1 when the source does
    // not say. 0 means the expert saw none: `weights` are then the source's stand-in (llama.cpp: 1).
    std::int64_t tokens = -1;
};

class MOEQUANT_API ExpertImportance {
public:
    virtual ~ExpertImportance();

    // Expert `expert`'s matrix `role`: its column weights, or none (the matrix is then quantized
    // without). Thread-safe. Throws Error(input) naming the file and entry when it cannot be read.
    virtual ColumnImportance columns(const MatrixRole& role, std::int64_t expert) const = 0;

    // What the importance is, as the run manifest records it (a rerun with another one redoes
    // every layer), e.g. "imatrix.gguf, 12345 bytes, sha256:..., 40 chunks".
    virtual std::string identity() const = 0;
};

}  // namespace moequant
