// Progress of a long job: layer i/N, rate and ETA. On a terminal one status line is rewritten
// in place (cut to the terminal's width); otherwise one plain line per step (for logs).
#pragma once


#include <cstdint>
#include <cstdio>
#include <string>

namespace moequant {

class ProgressSink {
public:
    virtual ~ProgressSink();
    // Step `done` of `total` finished (`label` names it); `bytes_done` of `bytes_total` input,
    // or both 0 when the steps are the only measure (the rate is then seconds per step).
    virtual void step(std::size_t done, std::size_t total, const std::string& label, std::uint64_t bytes_done,
                      std::uint64_t bytes_total) = 0;
    // Where a step has got to (e.g. the expert of a layer): replaces the status line on a
    // terminal, a plain line otherwise.
    virtual void status(const std::string& line) = 0;
    // A line to keep (a fact about the run).
    virtual void note(const std::string& line) = 0;
    virtual void finish() = 0;
};

// Writes to a stdio stream: live updates when it is a terminal, plain lines otherwise.
class StreamProgress final : public ProgressSink {
public:
    explicit StreamProgress(std::FILE* stream);
    void step(std::size_t done, std::size_t total, const std::string& label, std::uint64_t bytes_done,
              std::uint64_t bytes_total) override;
    void status(const std::string& line) override;
    void note(const std::string& line) override;
    void finish() override;

private:
    void show(const std::string& line);  // the status line (terminal) or a plain line

    std::FILE* stream_;
    bool terminal_;
    bool line_open_ = false;
    double start_;
};

// Discards everything.
class SilentProgress final : public ProgressSink {
public:
    void step(std::size_t, std::size_t, const std::string&, std::uint64_t, std::uint64_t) override {}
    void status(const std::string&) override {}
    void note(const std::string&) override {}
    void finish() override {}
};

}  // namespace moequant
