#pragma once
// The options every subcommand reads (help, scenario, report, its side outputs, log level), and
// those of the report subcommand alone (part of the registry in app/cli/cli_options.cpp).
#include <boost/program_options.hpp>

namespace tp {

boost::program_options::options_description general_options();
boost::program_options::options_description report_options();

}  // namespace tp
