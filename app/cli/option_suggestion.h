#pragma once
// What an unknown option name is most likely a misspelling of.
#include <boost/program_options.hpp>
#include <string>

namespace tp {

// "unknown option '--NAME'", and "; did you mean --OTHER?" for the registered option closest to
// it (at most a third of its letters away, or one it is a prefix of).
std::string unknown_option_text(const boost::program_options::options_description& options,
                                std::string given);

}  // namespace tp
