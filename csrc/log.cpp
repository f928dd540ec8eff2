// torch_cudajit: reporting compiles and dumping generated sources (see log.h).
#include "log.h"

#include <c10/util/Exception.h>

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>

namespace torch_cudajit {
namespace {

struct Sink {
  std::mutex mutex;
  std::shared_ptr<const std::function<void(int, const std::string&)>> fn;
};

Sink& sink() {
  static Sink* s = new Sink();  // never destroyed: compiles may report during exit
  return *s;
}

std::atomic<bool> g_has_sink{false};

}  // namespace

void set_log_sink(std::function<void(int level, const std::string& message)> fn) {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mutex);
  g_has_sink = static_cast<bool>(fn);
  s.fn = fn ? std::make_shared<const std::function<void(int, const std::string&)>>(std::move(fn))
            : nullptr;
}

int log_level_from_env() {
  static const int level = [] {
    const char* v = std::getenv("TORCH_CUDAJIT_LOG");
    if (v == nullptr) return 0;
    const std::string s = v;
    if (s == "debug" || s == "DEBUG" || s == "+" || s == "2") return static_cast<int>(LogLevel::kDebug);
    if (s == "info" || s == "INFO" || s == "1") return static_cast<int>(LogLevel::kInfo);
    return 0;
  }();
  return level;
}

namespace detail {

bool log_enabled(LogLevel level) {
  if (g_has_sink.load(std::memory_order_relaxed)) return true;
  const int wanted = log_level_from_env();
  return wanted > 0 && static_cast<int>(level) >= wanted;
}

void log(LogLevel level, const std::string& message) {
  std::shared_ptr<const std::function<void(int, const std::string&)>> fn;
  {
    Sink& s = sink();
    std::lock_guard<std::mutex> lock(s.mutex);
    fn = s.fn;
  }
  if (fn) {
    (*fn)(static_cast<int>(level), message);
    return;
  }
  if (log_enabled(level))
    std::fprintf(stderr, "[torch_cudajit %s] %s\n", level == LogLevel::kDebug ? "DEBUG" : "INFO",
                 message.c_str());
}

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string elapsed_ms(long long start_ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f ms", static_cast<double>(now_ns() - start_ns) / 1e6);
  return buf;
}

const std::string& dump_folder() {
  static const std::string folder = [] {
    const char* v = std::getenv("TORCH_CUDAJIT_DUMP");
    return std::string(v != nullptr ? v : "");
  }();
  return folder;
}

std::string dump_source(const std::string& stem, const std::string& text) {
  const std::string& folder = dump_folder();
  if (folder.empty()) return "";
  static std::once_flag warned;
  if (mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) {
    const int err = errno;
    std::call_once(warned, [&] {
      TORCH_WARN("torch_cudajit: TORCH_CUDAJIT_DUMP names '", folder, "', which cannot be "
                 "created (", std::strerror(err), "); generated sources are not dumped.");
    });
    return "";
  }
  const std::string path = folder + "/" + stem + ".cu";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) {
    std::call_once(warned, [&] {
      TORCH_WARN("torch_cudajit: cannot write '", path, "' in the TORCH_CUDAJIT_DUMP folder; "
                 "generated sources are not dumped.");
    });
    return "";
  }
  return path;
}

}  // namespace detail
}  // namespace torch_cudajit
