#include "common/redact.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "common/printf_text.h"
#include "common/text_safety.h"

namespace tp {
namespace {

// Words that make a name secret, in any case.
const char* const kSecretWords[] = {"TOKEN",  "KEY",        "SECRET", "PASSWORD",
                                    "PASSWD", "CREDENTIAL", "JWT"};

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& letter : out) letter = char(std::toupper(static_cast<unsigned char>(letter)));
  return out;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

bool word_char(char letter) {
  return std::isalnum(static_cast<unsigned char>(letter)) || letter == '+' || letter == '_' ||
         letter == '-';
}

// A stretch of text to replace with kRedacted: [begin, end).
using Span = std::pair<size_t, size_t>;

bool one_of(char letter, std::string_view set) {
  return set.find(letter) != std::string_view::npos;
}

size_t skip_while(std::string_view text, size_t at, bool (*keep)(char)) {
  while (at < text.size() && keep(text[at])) ++at;
  return at;
}

bool blank(char letter) {
  return letter == ' ' || letter == '\t';
}
bool letter_char(char letter) {
  return std::isalpha(static_cast<unsigned char>(letter));
}
bool key_char(char letter) {
  return std::isalnum(static_cast<unsigned char>(letter)) || one_of(letter, "_.-");
}
// A value runs to a blank, a quote or a separator of pairs.
bool value_char(char letter) {
  return !std::isspace(static_cast<unsigned char>(letter)) && !one_of(letter, "\"'&;,");
}
bool token_char(char letter) {
  return std::isalnum(static_cast<unsigned char>(letter)) || one_of(letter, "._~+/=-");
}

// Every position where `word` starts in `text`, ignoring case.
std::vector<size_t> find_all(std::string_view text, std::string_view word) {
  std::vector<size_t> found;
  const std::string haystack = upper(text), needle = upper(word);
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1))
    found.push_back(at);
  return found;
}

// The value after `at` in `name: value` or `name = value`: a quoted string (on one line), or a
// run of value characters; empty when no separator or value follows.
Span value_after_separator(std::string_view text, size_t at) {
  at = skip_while(text, at, blank);
  if (at >= text.size() || !one_of(text[at], ":=")) return {at, at};
  at = skip_while(text, at + 1, blank);
  if (at < text.size() && one_of(text[at], "\"'")) {
    const size_t close = text.find_first_of(std::string{text[at], '\n'}, at + 1);
    if (close != std::string_view::npos && text[close] == text[at]) return {at, close + 1};
  }
  return {at, skip_while(text, at, value_char)};
}

// scheme://user:password@host and scheme://token@host: the user information.
void url_credentials(std::string_view text, std::vector<Span>& spans) {
  for (size_t at : find_all(text, "://")) {
    if (at == 0 || !std::isalnum(static_cast<unsigned char>(text[at - 1]))) continue;
    const size_t user = at + 3;
    size_t end = user;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) &&
           !one_of(text[end], "/?#@\"'"))
      ++end;
    if (end > user && end < text.size() && text[end] == '@') spans.emplace_back(user, end);
  }
}

// Authorization: Basic dXNlcjpwYXNz: the credential after the scheme.
void authorization_headers(std::string_view text, std::vector<Span>& spans) {
  for (size_t at : find_all(text, "authorization")) {
    Span value = value_after_separator(text, at + std::string_view("authorization").size());
    const size_t scheme_end = skip_while(text, value.first, letter_char);
    const size_t after_blank = skip_while(text, scheme_end, blank);
    if (scheme_end > value.first && after_blank > scheme_end && after_blank < text.size() &&
        value_char(text[after_blank]))
      value = {after_blank, skip_while(text, after_blank, value_char)};
    if (value.second > value.first) spans.push_back(value);
  }
}

// Bearer <token>.
void bearer_tokens(std::string_view text, std::vector<Span>& spans) {
  for (size_t at : find_all(text, "bearer")) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_'))
      continue;
    const size_t token = skip_while(text, at + 6, blank);
    const size_t end = skip_while(text, token, token_char);
    if (token > at + 6 && end > token) spans.emplace_back(token, end);
  }
}

// token=..., HF_TOKEN=..., api_key: ..., password = "...": the value.
void secret_pairs(std::string_view text, std::vector<Span>& spans) {
  for (const char* word : kSecretWords)
    for (size_t at : find_all(text, word)) {
      const Span value = value_after_separator(text, skip_while(text, at, key_char));
      if (value.second > value.first) spans.push_back(value);
    }
}

std::string replace_spans(std::string_view text, std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end());
  std::string out;
  size_t copied = 0;
  for (const auto& [begin, end] : spans) {
    if (end <= copied) continue;
    if (begin >= copied) {
      out.append(text.substr(copied, begin - copied));
      out += kRedacted;
    }
    copied = end;  // an overlapping span extends the one already replaced
  }
  out.append(text.substr(copied));
  return out;
}

// `text` with each high-entropy word replaced.
std::string redact_high_entropy_words(const std::string& text) {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    size_t end = at;
    while (end < text.size() && word_char(text[end])) ++end;
    if (end == at) {
      out += text[at++];
      continue;
    }
    const std::string_view word = std::string_view(text).substr(at, end - at);
    out += high_entropy_word(word) ? std::string(kRedacted) : std::string(word);
    at = end;
  }
  return out;
}

}  // namespace

bool secret_name(std::string_view name) {
  const std::string name_upper = upper(name);
  for (const char* word : kSecretWords)
    if (name_upper.find(word) != std::string::npos) return true;
  return ends_with(name_upper, "PRECONDITION_TRANSPORTS");
}

bool safe_variable(std::string_view name) {
  static const char* const kSafe[] = {"CUDA_VISIBLE_DEVICES",
                                      "NVIDIA_VISIBLE_DEVICES",
                                      "ROCR_VISIBLE_DEVICES",
                                      "HIP_VISIBLE_DEVICES",
                                      "OMPI_ARGV",
                                      "OMPI_COMMAND"};
  if (std::find(std::begin(kSafe), std::end(kSafe), name) != std::end(kSafe)) return true;
  return starts_with(name, "SLURM_") || starts_with(name, "NCCL_");
}

double entropy_bits_per_char(std::string_view word) {
  std::array<size_t, 256> counts{};
  for (char letter : word) ++counts[static_cast<unsigned char>(letter)];
  double bits = 0;
  for (size_t count : counts) {
    if (count == 0) continue;
    const double share = double(count) / double(word.size());
    bits -= share * std::log2(share);
  }
  return bits;
}

bool high_entropy_word(std::string_view word) {
  if (word.size() < kMinSecretWordLength) return false;
  const auto has = [&](int (*test)(int)) {
    return std::any_of(word.begin(), word.end(),
                       [&](char letter) { return test(static_cast<unsigned char>(letter)); });
  };
  if (!has(std::isdigit) || !has(std::isalpha)) return false;
  const bool hex = std::all_of(word.begin(), word.end(), [](char letter) {
    return std::isxdigit(static_cast<unsigned char>(letter)) || letter == '-';
  });
  const double alphabet = hex ? 16.0 : 64.0;
  const double most = std::log2(std::min(double(word.size()), alphabet));
  return entropy_bits_per_char(word) >= kSecretEntropyFraction * most;
}

std::string redact_text(const std::string& text) {
  std::vector<Span> spans;
  url_credentials(text, spans);
  authorization_headers(text, spans);
  bearer_tokens(text, spans);
  secret_pairs(text, spans);
  return spans.empty() ? text : replace_spans(text, std::move(spans));
}

std::vector<std::string> redact_argv(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  bool value_of_secret_flag = false;
  for (const std::string& word : argv) {
    out.push_back(value_of_secret_flag ? std::string(kRedacted) : redact_text(word));
    const size_t name_at = word.find_first_not_of('-');
    value_of_secret_flag = name_at > 0 && name_at != std::string::npos &&
                           word.find('=') == std::string::npos && secret_name(word.substr(name_at));
  }
  return out;
}

std::string redact_variable(std::string_view name, const std::string& value) {
  if (secret_name(name)) return kRedacted;
  const std::string text = redact_text(value);
  return safe_variable(name) ? text : redact_high_entropy_words(text);
}

nlohmann::json redact_options(nlohmann::json options) {
  for (auto& [name, value] : options.items()) {
    if (secret_name(name)) {
      value = kRedacted;
    } else if (value.is_string()) {
      value = redact_text(value.get<std::string>());
    } else if (value.is_array()) {
      for (auto& item : value)
        if (item.is_string()) item = redact_text(item.get<std::string>());
    }
  }
  return options;
}

std::string message_text(const std::string& message) {
  const std::string text = redact_text(message);
  std::string out;
  for (size_t at = 0; at < text.size();) {
    const size_t length = utf8_sequence_length(text, at);
    const auto byte = static_cast<unsigned char>(text[at]);
    if (length == 0 || (length == 1 && (byte < 0x20 || byte == 0x7f))) {
      out += printf_text("\\x%02X", unsigned(byte));
      ++at;
    } else {
      out.append(text, at, length);
      at += length;
    }
  }
  return out;
}

}  // namespace tp
