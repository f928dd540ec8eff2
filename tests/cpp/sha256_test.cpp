// torch_cudajit C++ tests: SHA-256 (csrc/sha256.h) against the FIPS 180-4 test vectors, fed
// whole and in pieces of every size, and the length-prefixed fields of cache keys.
#include "sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace torch_cudajit {
namespace {

struct Vector {
  std::string message;
  const char* digest;
};

const Vector kVectors[] = {
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
};

TEST(Sha256Test, KnownVectors) {
  for (size_t i = 0; i < sizeof(kVectors) / sizeof(kVectors[0]); ++i) {
    SCOPED_TRACE("message of " + std::to_string(kVectors[i].message.size()) + " bytes");
    EXPECT_EQ(sha256_hex(kVectors[i].message), kVectors[i].digest);
  }
}

TEST(Sha256Test, PiecewiseFeedMatchesWholeFeed) {
  for (size_t length : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 119u, 120u, 1000u}) {
    std::string message;
    for (size_t i = 0; i < length; ++i) message.push_back(static_cast<char>('a' + i % 26));
    const std::string whole = sha256_hex(message);
    for (size_t piece : {1u, 3u, 63u, 64u, 65u}) {
      SCOPED_TRACE("length " + std::to_string(length) + ", pieces of " + std::to_string(piece));
      Sha256 h;
      for (size_t at = 0; at < message.size(); at += piece)
        h.update(message.data() + at, std::min(piece, message.size() - at));
      EXPECT_EQ(h.hex_digest(), whole);
    }
  }
}

TEST(Sha256Test, FieldsAreLengthPrefixed) {
  EXPECT_NE(Sha256().field("ab").field("c").hex_digest(), Sha256().field("a").field("bc").hex_digest());
  EXPECT_EQ(Sha256().field("ab").field("c").hex_digest(), Sha256().field("ab").field("c").hex_digest());
  EXPECT_EQ(sha256_hex("abc").size(), 64u);
}

}  // namespace
}  // namespace torch_cudajit
