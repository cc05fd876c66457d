// cohort.h: the whole of cohort that needs no libtorch, in one include.
//
// CMake: find_package(cohort) and link cohort::cohort. It brings stores
// (TcpStore, FileStore, HashStore, PrefixStore), process groups with every
// collective and point-to-point call on plain buffers, the torch.distributed
// functions (init_process_group, all_reduce, new_group, ...), object
// collectives, DeviceMesh, symmetric memory, the knobs, and what a worker
// started by a launcher uses (elastic.h). The libtorch layer (DDP, FSDP,
// DTensor, RPC, ...) is cohort/torch.h, a separate target.
#pragma once

#include "cohort/config.h"
#include "cohort/device_mesh.h"
#include "cohort/distributed.h"
#include "cohort/elastic.h"
#include "cohort/errors.h"
#include "cohort/file_store.h"
#include "cohort/hash_store.h"
#include "cohort/object_collectives.h"
#include "cohort/prefix_store.h"
#include "cohort/process_group.h"
#include "cohort/store.h"
#include "cohort/symmetric_memory.h"
#include "cohort/tcp_store.h"
#include "cohort/tcp_store_server.h"
#include "cohort/types.h"
#include "cohort/work.h"
