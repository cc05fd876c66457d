#include "launcher/failure_summary.h"

namespace cohort::launcher {
namespace {

std::string describe(const WorkerFailure& f) {
  std::string exit_text = f.state.signal
                              ? std::to_string(-f.state.signal) + " (" + signal_name(f.state.signal) + ")"
                              : std::to_string(f.state.exit_code);
  std::string message = f.message;
  for (size_t at = message.find('\n'); at != std::string::npos; at = message.find('\n', at + 1))
    message.insert(at + 1, "              ");
  return "  time      : " + f.time + "\n  host      : " + f.host +
         "\n  rank      : " + std::to_string(f.rank) + " (local_rank: " + std::to_string(f.local_rank) +
         ")\n  exitcode  : " + exit_text + " (pid: " + std::to_string(f.pid) +
         ")\n  error_file: " + (f.error_file_shown.empty() ? f.error_file : f.error_file_shown) +
         "\n  traceback : " + message + "\n";
}

}  // namespace

std::string failure_summary(const std::string& program, const std::vector<WorkerFailure>& failures) {
  const std::string rule(60, '='), thin(60, '-');
  std::string out = rule + "\n" + program + " FAILED\n" + thin + "\nFailures:\n";
  if (failures.size() <= 1) out += "  <NO_OTHER_FAILURES>\n";
  for (size_t i = 1; i < failures.size(); ++i)
    out += "[" + std::to_string(i) + "]:\n" + describe(failures[i]);
  out += thin + "\nRoot Cause (first observed failure):\n";
  if (!failures.empty()) out += "[0]:\n" + describe(failures[0]);
  return out + rule + "\n";
}

}  // namespace cohort::launcher
