// debug_level.h: COHORT_DEBUG, the debugging aids' one switch.
//
// off: nothing. info: groups log their creation and the algorithms they
// choose, and log lines of level info print whatever COHORT_LOG_LEVEL says
// (as torch's TORCH_DISTRIBUTED_DEBUG=INFO). detail: info, and the ranks of
// a group compare a fingerprint of every collective before running it
// (process_group/desync_check.h).
#pragma once

namespace cohort {

enum class DebugLevel { kOff = 0, kInfo = 1, kDetail = 2 };

// debug_level returns COHORT_DEBUG, parsed once per change of the config
// (two atomic loads otherwise). A value that is not a level throws
// InvalidArgument naming the knob.
DebugLevel debug_level();

}  // namespace cohort
