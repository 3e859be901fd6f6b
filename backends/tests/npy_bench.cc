// The exchange's .npy reads and writes (backends/contract/npy.h) against the way they went before
// 2026-11-28, in one run: the whole file through a string stream then decoded into a copy, and the
// header and payload joined into one string before the write. Each executor server reads every
// pool of every request, so this is the exchange's largest piece (docs/gpu.md, "Executor servers").
//   build/backends/tests/npy_bench [DIR]   # DIR: where the file goes (default /dev/shm, a tmpfs)
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "backends/contract/npy.h"

using namespace kvfuzz;

namespace {

NpyArray read_before(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return decode_npy(ss.str(), path);
}

void write_before(const std::string& path, const NpyArray& a) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const std::string bytes = encode_npy(a);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = std::string(argc > 1 ? argv[1] : "/dev/shm") + "/kvfuzz_npy_bench.npy";
  std::printf("%8s %12s %12s %6s %12s %12s %6s\n", "array", "read before", "read now", "ratio", "write before", "write now",
              "ratio");
  for (const int64_t mib : {1, 8, 32}) {
    const std::vector<float> v(static_cast<size_t>(mib) * 262144, 1.5f);
    const NpyArray a = NpyArray::of<float>({static_cast<int64_t>(v.size())}, v);
    const int reps = static_cast<int>(256 / mib);
    double r[2] = {0, 0}, w[2] = {0, 0};
    for (int i = 0; i < reps; ++i) {  // interleaved, so that both meet the same machine
      w[0] += seconds([&] { write_before(path, a); });
      w[1] += seconds([&] { write_npy(path, a); });
      NpyArray before, now;
      r[0] += seconds([&] { before = read_before(path); });
      r[1] += seconds([&] { now = read_npy(path); });
      if (before.bytes != a.bytes || now.bytes != a.bytes) return 1;
    }
    std::printf("%5ld MiB %9.2f ms %9.2f ms %6.2f %9.2f ms %9.2f ms %6.2f\n", static_cast<long>(mib), 1e3 * r[0] / reps,
                1e3 * r[1] / reps, r[1] / r[0], 1e3 * w[0] / reps, 1e3 * w[1] / reps, w[1] / w[0]);
  }
  std::remove(path.c_str());
}
