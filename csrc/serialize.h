// torch_cudajit: the byte format of what a kernel keeps across processes (its reflection, and
// the state of its TorchScript object): a sequence of "<length>:<bytes>" fields, so any text
// round-trips, read back with checks that name what is damaged.
#pragma once

#include <c10/util/Exception.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace torch_cudajit::detail {

/// Bytes as UTF-8 text: valid UTF-8 sequences are kept, and every other byte is read as Latin-1
/// (NVRTC echoes a Latin-1 header's `#warning` byte for byte), so that compiler logs, and
/// messages that quote bytes read from outside, always decode.
inline std::string utf8_text(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool valid = n > 0 && i + n <= bytes.size();
    for (size_t j = 1; valid && j < n; ++j)
      valid = (static_cast<unsigned char>(bytes[i + j]) >> 6) == 2;
    // Overlong two-byte forms (0xC0, 0xC1) and code points past U+10FFFF are not UTF-8.
    if (valid && n == 2) valid = b >= 0xC2;
    if (valid && n == 4) valid = b <= 0xF4;
    if (valid) {
      out.append(bytes, i, n);
      i += n;
    } else {
      out += static_cast<char>(0xC0 | (b >> 6));
      out += static_cast<char>(0x80 | (b & 0x3F));
      ++i;
    }
  }
  return out;
}

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
/// Every length and count is checked against the bytes that remain before anything is
/// allocated, and every number is checked digit by digit, so damaged bytes give an error that
/// says where, never a huge allocation or a foreign exception.
class Reader {
 public:
  Reader(const std::string& in, const char* what) : in_(in), what_(what) {}
  /// Names the field the next reads belong to in errors (nullptr: none).
  void field(const char* name) { field_ = name; }
  std::string text() {
    const size_t colon = in_.find(':', pos_);
    TORCH_CHECK_VALUE(colon != std::string::npos && colon > pos_ && colon - pos_ <= 19 &&
                          digits(pos_, colon),
                      "torch_cudajit: ", what_, " is damaged at byte ", pos_,
                      " (a field's length is missing)", in_field(),
                      "; pickle or script the kernel again.");
    const size_t n = std::stoull(in_.substr(pos_, colon - pos_));
    TORCH_CHECK_VALUE(n <= in_.size() - colon - 1, "torch_cudajit: ", what_,
                      " is truncated at byte ", pos_, " (a field of ", n, " bytes, ",
                      in_.size() - colon - 1, " left)", in_field(),
                      "; pickle or script the kernel again.");
    pos_ = colon + 1 + n;
    return in_.substr(colon + 1, n);
  }
  /// A non-negative number written in decimal digits.
  size_t number() {
    const size_t at = pos_;
    const std::string t = text();
    // size_t's own range: at most 20 digits, not past 18446744073709551615 (npos is one value).
    const bool fits = t.size() < 20 || (t.size() == 20 && t <= "18446744073709551615");
    TORCH_CHECK_VALUE(!t.empty() && fits && digits(t), "torch_cudajit: ", what_,
                      " is damaged at byte ", at, " (a number holds '", utf8_text(t.substr(0, 32)),
                      "')", in_field(), "; pickle or script the kernel again.");
    return std::stoull(t);
  }
  /// A signed number ("-1", "0", "42").
  int64_t integer() {
    const size_t at = pos_;
    const std::string t = text();
    const size_t sign = !t.empty() && t[0] == '-' ? 1 : 0;
    TORCH_CHECK_VALUE(t.size() > sign && t.size() - sign <= 18 && digits(t.substr(sign)),
                      "torch_cudajit: ", what_, " is damaged at byte ", at, " (an integer holds '",
                      utf8_text(t.substr(0, 32)), "')", in_field(),
                      "; pickle or script the kernel again.");
    return std::stoll(t);
  }
  /// A count of items of at least `min_bytes` bytes each: at most what the remaining bytes can
  /// hold.
  size_t count(size_t min_bytes) {
    const size_t at = pos_;
    const size_t n = number();
    const size_t left = in_.size() - pos_;
    TORCH_CHECK_VALUE(n <= left / min_bytes, "torch_cudajit: ", what_, " is damaged at byte ", at,
                      " (it counts ", n, " items, and ", left, " bytes remain)", in_field(),
                      "; pickle or script the kernel again.");
    return n;
  }
  /// "1" or "0".
  bool flag() {
    const size_t at = pos_;
    const std::string t = text();
    TORCH_CHECK_VALUE(t == "1" || t == "0", "torch_cudajit: ", what_, " is damaged at byte ", at,
                      " (a flag holds '", utf8_text(t.substr(0, 32)), "')", in_field(),
                      "; pickle or script the kernel again.");
    return t == "1";
  }
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
  // " in its field 'name'" when a field is named, for the end of an error.
  std::string in_field() const {
    return field_ ? std::string(" in its field '") + field_ + "'" : std::string();
  }
  bool digits(size_t from, size_t to) const {
    for (size_t i = from; i < to; ++i)
      if (in_[i] < '0' || in_[i] > '9') return false;
    return true;
  }
  static bool digits(const std::string& t) {
    for (char c : t)
      if (c < '0' || c > '9') return false;
    return true;
  }

  const std::string& in_;
  const char* what_;
  const char* field_ = nullptr;
  size_t pos_ = 0;
};

}  // namespace torch_cudajit::detail
