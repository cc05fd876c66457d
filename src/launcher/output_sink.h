// output_sink.h: where one stream (stdout or stderr) of one worker goes:
// to the console as whole lines prefixed "[rankN]: " (torchrun's prefix),
// to a log file as is, to both, or nowhere.
#pragma once

#include <string>

namespace cohort::launcher {

class OutputSink {
 public:
  // console_fd: 1, 2, or -1 for none. file_path: "" for none; the file is
  // created (and its folder must exist).
  OutputSink(std::string prefix, int console_fd, const std::string& file_path);
  ~OutputSink();
  OutputSink(const OutputSink&) = delete;
  OutputSink& operator=(const OutputSink&) = delete;

  // feed takes bytes read from the worker's pipe; whole lines go out now.
  void feed(const char* data, size_t n);
  // finish writes a last line that had no newline (the pipe closed).
  void finish();

 private:
  void write_console(const std::string& line);

  std::string prefix_;
  int console_fd_;
  int file_fd_ = -1;
  std::string partial_;
};

}  // namespace cohort::launcher
