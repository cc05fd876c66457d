// orphan_reaper.h: no process a worker started outlives the launcher, even
// a launcher killed with SIGKILL.
//
// A worker's own process dies with the launcher (PR_SET_PDEATHSIG), but a
// worker that is a wrapper (`sh -c "train; echo done"`) leaves its
// children, reparented to init, running. They stay in the worker's process
// group, so a helper process that outlives the launcher kills those
// groups: the launcher tells it each group it starts and ends through a
// pipe, and when the pipe closes (the launcher is gone, however it went)
// the helper SIGKILLs every group still listed and exits.
#pragma once

#include <sys/types.h>

namespace cohort::launcher {

class OrphanReaper {
 public:
  // Forks the helper. Call it before the launcher starts any thread.
  OrphanReaper();
  // Closes the pipe: the helper kills the groups still listed and exits.
  ~OrphanReaper();
  OrphanReaper(const OrphanReaper&) = delete;
  OrphanReaper& operator=(const OrphanReaper&) = delete;

  // watch lists a worker's process group; release removes it (call it once
  // the group was killed, so that a reused group id is never signalled).
  void watch(pid_t group);
  void release(pid_t group);

 private:
  void tell(char what, pid_t group);
  int fd_ = -1;  // the pipe's write end; -1 when the helper could not start
};

}  // namespace cohort::launcher
