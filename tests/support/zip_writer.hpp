// A tiny zip writer for tests: STORED entries laid out the way torch.save lays them out (data
// aligned to 64 bytes through an extra field), optionally with zip64 records and fields or with
// data descriptors (as torch 1.x writes). It records where each part went so that a test can
// break exactly one field afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moequant::test {

struct ZipWriterOptions {
    bool zip64 = false;            // zip64 end records, and zip64 extra fields in every header
    bool data_descriptors = false; // sizes and CRC after the data, zeros in the local header
    std::uint64_t alignment = 64;  // data offsets are multiples of this (1: no padding)
};

struct ZipWritten {
    std::string name;
    std::uint64_t local_header = 0;  // offset of the local header
    std::uint64_t data = 0;          // offset of the data
    std::uint64_t central_header = 0;
};

class ZipWriter {
public:
    explicit ZipWriter(ZipWriterOptions options = {}) : options_(options) {}

    // Adds an entry; `method` and `flags` are written as given (the data is never compressed).
    void add(const std::string& name, const std::vector<std::uint8_t>& data, std::uint16_t method = 0,
             std::uint16_t flags = 0);
    void add(const std::string& name, const std::string& text) { add(name, std::vector<std::uint8_t>(text.begin(), text.end())); }

    // The central directory and end records after the entries; the bytes of the whole archive.
    std::vector<std::uint8_t> finish(const std::string& comment = {});

    const std::vector<ZipWritten>& written() const { return written_; }
    std::uint64_t end_record() const { return end_record_; }  // offset of the classic end record
    std::uint64_t central_directory() const { return central_directory_; }

private:
    struct Entry {
        ZipWritten where;
        std::uint32_t crc = 0;
        std::uint64_t size = 0;
        std::uint16_t method = 0, flags = 0;
    };
    ZipWriterOptions options_;
    std::vector<std::uint8_t> out_;
    std::vector<Entry> entries_;
    std::vector<ZipWritten> written_;
    std::uint64_t end_record_ = 0, central_directory_ = 0;
};

// CRC-32 as zip computes it.
std::uint32_t zip_crc32(const std::vector<std::uint8_t>& data);

// Little-endian field writes into `bytes` at `at` (for breaking an archive).
void put_le(std::vector<std::uint8_t>& bytes, std::uint64_t at, std::uint64_t value, int width);

}  // namespace moequant::test
