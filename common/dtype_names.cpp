#include "common/dtype_names.h"

#include <algorithm>
#include <cctype>

namespace tp {

std::string dtype_name(const std::string& spelling) {
  std::string s = spelling;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  struct Name {
    const char* canonical;
    std::initializer_list<const char*> spellings;
  };
  static const Name names[] = {{"float32", {"float32", "fp32", "float", "f32"}},
                               {"bfloat16", {"bfloat16", "bf16"}},
                               {"float16", {"float16", "fp16", "half", "f16"}},
                               {"int32", {"int32", "i32", "int"}}};
  for (const Name& n : names)
    for (const char* spelled : n.spellings)
      if (s == spelled) return n.canonical;
  return "";
}

}  // namespace tp
