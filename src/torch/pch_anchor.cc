// The one source file of cohort_torch_pch, the target that builds the
// precompiled <torch/torch.h> every libtorch program reuses
// (src/CMakeLists.txt, cohort_torch_program). It has no code of its own.
