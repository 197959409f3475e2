#pragma once
// The options of the acceptance run and its judgement: accept.*, the gate's thresholds, and the
// cost rates (part of the registry in app/cli/cli_options.cpp).
#include <boost/program_options.hpp>

namespace tp {

boost::program_options::options_description accept_options();
boost::program_options::options_description gate_options();
boost::program_options::options_description cost_options();

}  // namespace tp
