// torch.h: cohort's libtorch layer, in one include (and cohort.h with it).
//
// CMake: find_package(cohort COMPONENTS cohort_torch) and link
// cohort::cohort_torch (built only where cohort found libtorch). It brings
// collectives on tensors, DistributedDataParallel and its communication
// hooks, Join, samplers and data loading, DataParallel, checkpoints and
// distributed checkpoints, DTensor and its operators, FSDP, tensor and
// pipeline parallelism, and RPC with distributed autograd.
#pragma once

#include "cohort/checkpoint.h"
#include "cohort/cohort.h"
#include "cohort/comm_hooks.h"
#include "cohort/data.h"
#include "cohort/data_parallel.h"
#include "cohort/ddp.h"
#include "cohort/dist_autograd.h"
#include "cohort/distributed_checkpoint.h"
#include "cohort/dtensor.h"
#include "cohort/dtensor_ops.h"
#include "cohort/fsdp.h"
#include "cohort/join.h"
#include "cohort/pipelining.h"
#include "cohort/rpc.h"
#include "cohort/tensor.h"
#include "cohort/tensor_parallel.h"
