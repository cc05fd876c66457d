// exit_codes.h: what cohortrun's exit code says (docs/launcher.md lists
// them for users).
#pragma once

namespace cohort::launcher {

inline constexpr int kExitSuccess = 0;        // every worker of the job exited 0
inline constexpr int kExitWorkersFailed = 1;  // a worker failed and no restart was left
inline constexpr int kExitUsage = 2;          // bad command line; nothing started
inline constexpr int kExitRendezvous = 3;     // rendezvous failed (timeout, backend unreachable)
inline constexpr int kExitSpawn = 4;          // the program could not be started
// 128 + N: the launcher received signal N (SIGINT, SIGTERM, SIGHUP), passed
// it to every worker and stopped them.

}  // namespace cohort::launcher
