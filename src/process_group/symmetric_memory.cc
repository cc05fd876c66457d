// SymmetricMemory itself, and the ordinary block that backends without
// shared memory hand out (Backend::alloc_symmetric's default).
#include "cohort/symmetric_memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "cohort/errors.h"
#include "process_group/backend.h"

namespace cohort {

SymmetricMemory::SymmetricMemory(void* data, size_t bytes, bool shared, std::function<void()> release)
    : data_(data), bytes_(bytes), shared_(shared), release_(std::move(release)) {}

SymmetricMemory::~SymmetricMemory() {
  if (release_) release_();
}

Buffer SymmetricMemory::buffer(DType dtype, size_t count, size_t offset_bytes) const {
  const size_t es = dtype_size(dtype);
  if (offset_bytes > bytes_ || count > (bytes_ - offset_bytes) / es) {
    throw InvalidArgument("SymmetricMemory::buffer: " + std::to_string(count) + " elements of " +
                          dtype_name(dtype) + " at offset " + std::to_string(offset_bytes) +
                          " do not fit in a block of " + std::to_string(bytes_) + " bytes");
  }
  return Buffer{static_cast<uint8_t*>(data_) + offset_bytes, count, dtype, Device{}};
}

Result<std::shared_ptr<SymmetricMemory>> Backend::alloc_symmetric(Store*, uint64_t, size_t bytes, Deadline) {
  constexpr size_t kPage = 4096;
  const size_t rounded = std::max(kPage, (bytes + kPage - 1) / kPage * kPage);
  void* p = std::aligned_alloc(kPage, rounded);
  if (!p) {
    return Status(StatusCode::kBackendError,
                  "alloc_symmetric: could not allocate " + std::to_string(bytes) + " bytes");
  }
  std::memset(p, 0, rounded);
  return std::make_shared<SymmetricMemory>(p, bytes, false, [p] { std::free(p); });
}

}  // namespace cohort
