// torch_cudajit: SHA-256, for disk-cache keys and the integrity check of cache files. A small
// self-contained implementation (FIPS 180-4) keeps the core free of a crypto dependency.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace torch_cudajit {

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  /// Appends bytes to the message.
  Sha256& update(const void* data, size_t size);
  Sha256& update(const std::string& s) { return update(s.data(), s.size()); }
  /// Appends a length-prefixed field, so that ("ab","c") and ("a","bc") hash differently.
  Sha256& field(const std::string& s);
  /// The 32-byte digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  /// The digest as 64 lowercase hex characters.
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t length_ = 0;
};

/// SHA-256 of a string, as hex.
std::string sha256_hex(const std::string& data);

}  // namespace torch_cudajit
