#pragma once
// The option registry behind app/cli/cli: every option of every subcommand, grouped as --help lists
// them, and the --fault grammar that --help prints after them.
#include <boost/program_options.hpp>
#include <string>

namespace tp {

boost::program_options::options_description option_registry();

// A preformatted table, so that Boost's wrapping of option descriptions never reflows it.
std::string fault_grammar();

}  // namespace tp
