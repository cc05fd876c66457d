// launch_cohort: what bench/launch_bench.sh times under cohortrun: join the
// job through env://, one barrier, leave.
#include "cohort/distributed.h"

int main() {
  cohort::init_process_group();
  cohort::barrier()->wait();
  cohort::destroy_process_group();
  return 0;
}
