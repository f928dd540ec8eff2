// torch_cudajit: what the plugin reports of its work (TORCH_CUDAJIT_LOG): each source read, each
// compile with its key, whether the disk cache answered, and how long it took; and the folder
// TORCH_CUDAJIT_DUMP names, where every generated source is written before NVRTC compiles it.
// The Python package sends the messages to the `torch_cudajit` logger of Python's logging; a
// LibTorch program without Python gets them on stderr. Only misses are reported: the launch
// path writes nothing.
#pragma once

#include <functional>
#include <string>

namespace torch_cudajit {

/// Message levels, numbered as Python's logging numbers them.
enum class LogLevel : int { kDebug = 10, kInfo = 20 };

/// Where messages go instead of stderr: the Python package's logger. Set once, at import;
/// an empty function goes back to stderr.
void set_log_sink(std::function<void(int level, const std::string& message)> sink);

/// The level TORCH_CUDAJIT_LOG asks for, read once: "debug" or "+" (kDebug), "info" or "1"
/// (kInfo); 0 when it is unset, empty, "0" or "off" (nothing is reported without a sink).
int log_level_from_env();

namespace detail {

/// True when a message at `level` goes anywhere: a sink is set (it filters for itself), or
/// TORCH_CUDAJIT_LOG asks for that level.
bool log_enabled(LogLevel level);
/// Reports `message`; build the message only when log_enabled says so.
void log(LogLevel level, const std::string& message);
/// Milliseconds since `start` (a steady_clock reading in nanoseconds), as "12.3 ms".
std::string elapsed_ms(long long start_ns);
/// steady_clock now, in nanoseconds.
long long now_ns();

/// The folder TORCH_CUDAJIT_DUMP names ("" when unset), created on first use.
const std::string& dump_folder();
/// Writes `text` as <dump folder>/<stem>.cu and returns the path ("" when there is no dump
/// folder or it cannot be written; a failure is reported once as a warning).
std::string dump_source(const std::string& stem, const std::string& text);

}  // namespace detail
}  // namespace torch_cudajit
