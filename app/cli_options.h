#pragma once
// The option registry behind app/cli: every option of every subcommand, grouped as --help lists
// them.
#include <boost/program_options.hpp>

namespace tp {

boost::program_options::options_description option_registry();

}  // namespace tp
