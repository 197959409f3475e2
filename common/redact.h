#pragma once
// Secrets never reach a report or a drill's files. A value is redacted by its variable's name, and
// within any text by its shape: credentials in URLs, bearer tokens, key=/token=/secret=/password=
// pairs; in environment values not known to be safe, also long high-entropy words
// (docs/report.md, "Secrets").
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tp {

inline constexpr const char* kRedacted = "<redacted>";

// A word must be this long, and its Shannon entropy this fraction of the most its length and
// alphabet allow, to count as a key (high_entropy_word).
inline constexpr size_t kMinSecretWordLength = 20;
inline constexpr double kSecretEntropyFraction = 0.85;

// A name whose value is a secret: it contains TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL or
// JWT (any case), or is Open MPI's transport key (..._precondition_transports).
bool secret_name(std::string_view name);

// Variables the report needs whose values may look random and hold no secret: GPU lists
// (CUDA_VISIBLE_DEVICES and its kin, GPU UUIDs), SLURM_* (job, step and node ids), NCCL_* (tuning)
// and OMPI_ARGV/OMPI_COMMAND (the command line, filtered like context.command_line). Their values
// are never redacted for entropy; the other rules still apply.
bool safe_variable(std::string_view name);

// Shannon entropy of the word's characters, in bits per character.
double entropy_bits_per_char(std::string_view word);

// A word of [A-Za-z0-9+_-] that looks like a key: at least kMinSecretWordLength characters, a
// letter and a digit among them, and an entropy of at least kSecretEntropyFraction of
// log2(min(length, alphabet)), the alphabet being 16 for hex words and 64 for any other.
bool high_entropy_word(std::string_view word);

// `text` with credentials in URLs (scheme://user:pass@), bearer tokens, the value of an
// Authorization header and the values of key=/token=/secret=/password= pairs (also
// NAME_TOKEN=..., "key: value", quoted values) replaced by kRedacted.
std::string redact_text(const std::string& text);

// A command line: each word through redact_text, and the word after --NAME where NAME is a secret
// name (`--token abc`).
std::vector<std::string> redact_argv(const std::vector<std::string>& argv);

// An environment variable's value as the report records it: kRedacted for a secret name, else
// redact_text, and for a variable not known to be safe every high-entropy word redacted.
std::string redact_variable(std::string_view name, const std::string& value);

// Options by name and value ({"name": value}): the value of a secret name redacted, every string
// through redact_text.
nlohmann::json redact_options(nlohmann::json options);

// An error message as a terminal shows it: secrets redacted (redact_text), and every control byte
// (but none of a valid UTF-8 character) and every byte outside valid UTF-8 as \xHH, so a value
// from a file or an option can neither leak a password nor move the cursor or clear the screen.
std::string message_text(const std::string& message);

}  // namespace tp
