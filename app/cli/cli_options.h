#pragma once
// The option registry behind app/cli/cli: every option of every subcommand, grouped as --help lists
// them, and the --fault grammar that --help prints after them.
#include <boost/program_options.hpp>
#include <string>

namespace tp {

// Every option. --help leaves the test.* hooks out (`with_test_hooks` false); --help-all and
// the parser keep them.
boost::program_options::options_description option_registry(bool with_test_hooks = true);

// A group of options as --help prints it: wide enough that no option name is cut mid-word.
boost::program_options::options_description option_group(const std::string& caption);

// A preformatted table, so that Boost's wrapping of option descriptions never reflows it.
std::string fault_grammar();

}  // namespace tp
