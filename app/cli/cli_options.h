#pragma once
// The option registry behind app/cli/cli: every option of every subcommand, in named groups, which
// groups each subcommand reads (its --help lists those), and the --fault grammar that --help
// prints after them.
#include <boost/program_options.hpp>
#include <string>
#include <vector>

namespace tp {

// The test suite's hooks: parsed for every subcommand, listed only by --help-all.
inline constexpr const char* kTestHooksGroup = "test";

// A group of options by name ("general", "model", "checkpoint", ...), as --help prints it.
struct OptionGroup {
  std::string name;
  boost::program_options::options_description (*make)();
};

// Every group, in the order --help-all lists them; the test hooks last.
const std::vector<OptionGroup>& option_groups();

// The groups a subcommand reads ("" for `trainproof --help`: the common ones), as the code reads
// them: app/cli/option_groups.cpp says which reader takes which group. Throws on an unknown name.
const std::vector<std::string>& option_groups_of(const std::string& subcommand);

// The options of the named groups, in the registry's order; the test hooks only with
// `with_test_hooks`.
boost::program_options::options_description option_registry_of(
    const std::vector<std::string>& groups, bool with_test_hooks);

// Every option. --help leaves the test.* hooks out (`with_test_hooks` false); --help-all and
// the parser keep them.
boost::program_options::options_description option_registry(bool with_test_hooks = true);

// A group of options as --help prints it: wide enough that no option name is cut mid-word.
boost::program_options::options_description option_group(const std::string& caption);

// A preformatted table, so that Boost's wrapping of option descriptions never reflows it.
std::string fault_grammar();

}  // namespace tp
