#include "process_group/group_log.h"

#include "cohort/process_group.h"
#include "common/debug_level.h"
#include "common/logging.h"
#include "process_group/backend.h"
#include "process_group/desync_check.h"

namespace cohort {

void log_group_created(const ProcessGroup& group, const Backend& backend, const DesyncCheck* check) {
  if (debug_level() == DebugLevel::kOff) return;
  std::string ranks;
  for (int r : group.global_ranks()) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const std::string links = backend.describe_links();
  const char* checked = !check                   ? "not checked"
                        : check->through_store() ? "fingerprinted through the store"
                                                 : "fingerprinted through the backend";
  COHORT_LOG(kInfo) << "group " << group.name() << " created: rank " << group.rank() << " of " << group.size()
                    << ", global ranks [" << ranks << "], backend " << backend.name() << ", timeout "
                    << group.timeout().count() << " ms" << (links.empty() ? "" : "; ") << links
                    << "; collectives " << checked
                    << " (COHORT_DEBUG=" << (debug_level() == DebugLevel::kDetail ? "detail" : "info") << ")";
}

}  // namespace cohort
