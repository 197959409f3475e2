#include "common/digest.h"

#include <xxhash.h>

#include <cstdio>
#include <new>

namespace tp {

std::string Digest128::hex() const {
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return text;
}

DigestBuilder::DigestBuilder() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset(state_);
}

DigestBuilder::~DigestBuilder() {
  XXH3_freeState(state_);
}

void DigestBuilder::add(const void* data, size_t bytes) {
  XXH3_128bits_update(state_, data, bytes);
}

Digest128 DigestBuilder::finish() const {
  const XXH128_hash_t h = XXH3_128bits_digest(state_);
  return {h.high64, h.low64};
}

Digest128 digest_of(const void* data, size_t bytes) {
  const XXH128_hash_t h = XXH3_128bits(data, bytes);
  return {h.high64, h.low64};
}

}  // namespace tp
