#include "common/json_depth.h"

namespace tp {

std::string json_depth_problem(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return "nested more than " + std::to_string(kMaxJsonDepth) +
               " levels deep (arrays and objects)";
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return "";
}

}  // namespace tp
