// group_log.h: COHORT_DEBUG=info's line about each new group, so that a
// log tells which groups a job made, of whom, and how their ranks talk.
#pragma once

namespace cohort {

class Backend;
class DesyncCheck;
class ProcessGroup;

// log_group_created logs, at info level when COHORT_DEBUG is info or
// detail, the group's name, rank, size, global ranks, backend and timeout,
// how this rank reaches the others, and whether calls are fingerprinted
// (`check`, null when they are not).
void log_group_created(const ProcessGroup& group, const Backend& backend, const DesyncCheck* check);

}  // namespace cohort
