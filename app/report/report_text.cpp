#include "app/report/report_text.h"

#include "common/text_safety.h"

namespace tp {
namespace {

using nlohmann::json;

// One member name as a JSON pointer step: "~" is "~0" and "/" is "~1".
std::string pointer_step(const std::string& name) {
  std::string step;
  for (char letter : name) {
    if (letter == '~')
      step += "~0";
    else if (letter == '/')
      step += "~1";
    else
      step += letter;
  }
  return step;
}

// Member names cannot change in place: an object with an invalid one is rebuilt.
void escape_names(json& object, const std::string& pointer, EscapedText& found) {
  bool any_invalid = false;
  for (const auto& member : object.items()) any_invalid = any_invalid || !valid_utf8(member.key());
  if (!any_invalid) return;
  json rebuilt = json::object();
  for (auto& member : object.items()) {
    std::string name = member.key();
    if (!valid_utf8(name)) {
      name = escape_invalid_utf8(name);
      found.keys.push_back(pointer + "/" + pointer_step(name));
    }
    rebuilt[name] = std::move(member.value());
  }
  object = std::move(rebuilt);
}

void escape_node(json& node, const std::string& pointer, EscapedText& found) {
  if (node.is_string()) {
    auto& text = node.get_ref<std::string&>();
    if (valid_utf8(text)) return;
    text = escape_invalid_utf8(text);
    found.strings.push_back(pointer);
  } else if (node.is_array()) {
    for (size_t index = 0; index < node.size(); ++index)
      escape_node(node[index], pointer + "/" + std::to_string(index), found);
  } else if (node.is_object()) {
    escape_names(node, pointer, found);
    for (auto& member : node.items())
      escape_node(member.value(), pointer + "/" + pointer_step(member.key()), found);
  }
}

// `list` (an array of pointers, or absent) with `more` appended.
json merged(const json& list, const std::vector<std::string>& more) {
  json out = list.is_array() ? list : json::array();
  for (const std::string& pointer : more) out.push_back(pointer);
  return out;
}

std::string escaped_text_warning(size_t strings, size_t names) {
  return std::string(kEscapedTextWarning) + std::to_string(strings) + " string(s) and " +
         std::to_string(names) +
         " member name(s); each byte that is not UTF-8 is written as \\xHH, and each backslash "
         "in those strings as \\\\ (context.escaped_strings, context.escaped_keys)";
}

}  // namespace

EscapedText escape_invalid_text(json& tree) {
  EscapedText found;
  escape_node(tree, "", found);
  return found;
}

void make_report_text_valid(json& report) {
  const EscapedText found = escape_invalid_text(report);
  json& context = report["context"];
  context["escaped_strings"] = merged(context["escaped_strings"], found.strings);
  context["escaped_keys"] = merged(context["escaped_keys"], found.keys);
  json& warnings = context["warnings"];
  if (!warnings.is_array()) warnings = json::array();
  const std::string prefix = kEscapedTextWarning;
  for (auto at = warnings.begin(); at != warnings.end();)
    at = at->is_string() && at->get<std::string>().rfind(prefix, 0) == 0 ? warnings.erase(at)
                                                                         : at + 1;
  const size_t strings = context["escaped_strings"].size(), names = context["escaped_keys"].size();
  if (strings + names > 0) warnings.push_back(escaped_text_warning(strings, names));
}

std::string dump_escaped(json tree, int indent) {
  escape_invalid_text(tree);
  return tree.dump(indent);
}

}  // namespace tp
