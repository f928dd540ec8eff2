// torch_cudajit: the byte format of what a kernel keeps across processes (its reflection, and
// the state of its TorchScript object): a sequence of "<length>:<bytes>" fields, so any text
// round-trips, read back with checks that name what is damaged.
#pragma once

#include <c10/util/Exception.h>

#include <cstddef>
#include <string>
#include <utility>

namespace torch_cudajit::detail {

/// Appends fields.
class Writer {
 public:
  Writer& operator<<(const std::string& s) {
    out_ += std::to_string(s.size()) + ":" + s;
    return *this;
  }
  Writer& operator<<(size_t v) { return *this << std::to_string(v); }
  Writer& operator<<(bool v) { return *this << std::string(v ? "1" : "0"); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

/// Reads fields in order; `what` names the data in errors ("a kernel's serialized reflection").
class Reader {
 public:
  Reader(const std::string& in, const char* what) : in_(in), what_(what) {}
  std::string text() {
    const size_t colon = in_.find(':', pos_);
    TORCH_CHECK_VALUE(colon != std::string::npos && colon > pos_ && colon - pos_ <= 20,
                      "torch_cudajit: ", what_, " is damaged at byte ", pos_,
                      "; pickle or script the kernel again.");
    const size_t n = std::stoull(in_.substr(pos_, colon - pos_));
    TORCH_CHECK_VALUE(n <= in_.size() - colon - 1, "torch_cudajit: ", what_,
                      " is truncated at byte ", pos_, "; pickle or script the kernel again.");
    pos_ = colon + 1 + n;
    return in_.substr(colon + 1, n);
  }
  size_t number() { return std::stoull(text()); }
  bool flag() { return text() == "1"; }
  /// An enumerator from 0 to `last`; `field` names it in the error.
  template <class E>
  E enumerator(E last, const char* field) {
    const size_t v = number();
    TORCH_CHECK_VALUE(v <= static_cast<size_t>(last), "torch_cudajit: ", what_, " has ", field,
                      " ", v, ", expected 0 to ", static_cast<size_t>(last),
                      "; pickle or script the kernel again.");
    return static_cast<E>(v);
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  const std::string& in_;
  const char* what_;
  size_t pos_ = 0;
};

}  // namespace torch_cudajit::detail
