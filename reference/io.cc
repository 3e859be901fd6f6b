#include "reference/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>

#include "reference/case_error.h"

namespace kvfuzz {

std::string read_input(const std::string& path, size_t limit) {
  std::string text;
  std::istream* in = &std::cin;
  std::ifstream file;
  if (path != "-") {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw InvalidCase(path + ": is a directory, not a case file");
    file.open(path, std::ios::binary);
    if (!file) throw InvalidCase(path + ": cannot open (" + std::strerror(errno) + ")");
    in = &file;
  }
  char buf[1 << 16];
  while (*in) {
    in->read(buf, sizeof buf);
    text.append(buf, static_cast<size_t>(in->gcount()));
    if (text.size() > limit)
      throw InvalidCase(path + ": larger than the limit of " + std::to_string(limit) + " bytes");
  }
  if (in->bad()) throw InvalidCase(path + ": read error");
  return text;
}

void write_file_atomic(const std::string& path, std::string_view text) {
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) throw std::runtime_error(path + ": cannot create a temporary file: " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error(path + ": write failed: " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::fchmod(fd, 0644) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": cannot finish the file: " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": rename failed: " + std::strerror(errno));
  }
}

}  // namespace kvfuzz
