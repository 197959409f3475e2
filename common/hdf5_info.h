#pragma once
#include <string>

namespace tp {

// "1.10.8 (parallel)": the HDF5 library actually loaded, not the header it was built against.
std::string hdf5_version();

}  // namespace tp
