#include "transport/shm/host_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace cohort::shm {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string namespace_inode(const char* path) {
  struct stat st {};
  if (::stat(path, &st) != 0) return "?";
  return std::to_string(static_cast<unsigned long long>(st.st_ino));
}

}  // namespace

std::string host_identity() {
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  return "boot=" + first_line("/proc/sys/kernel/random/boot_id") + " host=" + host +
         " ipc=" + namespace_inode("/proc/self/ns/ipc") + " mnt=" + namespace_inode("/proc/self/ns/mnt") +
         " pid=" + namespace_inode("/proc/self/ns/pid");
}

}  // namespace cohort::shm
