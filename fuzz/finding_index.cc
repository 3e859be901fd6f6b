#include "fuzz/finding_index.h"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "reference/case_error.h"
#include "reference/io.h"

namespace kvfuzz {

FindingIndex::FindingIndex(const std::string& dir) : path_(dir + "/index.jsonl") {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
}

FindingIndex::~FindingIndex() {
  if (fd_ >= 0) ::close(fd_);
}

void FindingIndex::append(const nlohmann::json& line) {
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot append to " + path_ + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  ::fdatasync(fd_);
}

std::string finding_record_path(const std::string& saved_case) {
  const std::string ext = ".json";
  const bool has = saved_case.size() >= ext.size() && saved_case.compare(saved_case.size() - ext.size(), ext.size(), ext) == 0;
  return (has ? saved_case.substr(0, saved_case.size() - ext.size()) : saved_case) + ".finding.json";
}

nlohmann::json read_finding_record(const std::string& path) {
  const bool is_record = path.size() > 13 && path.compare(path.size() - 13, 13, ".finding.json") == 0;
  const std::string record = is_record ? path : finding_record_path(path);
  if (!std::filesystem::exists(record))
    throw InvalidCase(path + ": no fingerprint record " + record +
                      " (a campaign of this kvfuzz writes one beside each saved case; to check a case file, name its "
                      "--backend)");
  try {
    return nlohmann::json::parse(read_input(record, kMaxCaseBytes));
  } catch (const nlohmann::json::exception& e) {
    throw InvalidCase(record + ": not a fingerprint record: " + e.what());
  }
}

}  // namespace kvfuzz
