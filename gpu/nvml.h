#pragma once
// Reads the GPU driver through NVML (libnvidia-ml.so.1), opened at run time as the GPU plugin's
// CUDA and NCCL are: the binary links no NVIDIA library and runs on hosts without one, where the
// view says why it could not be read. NVML ships with the driver, not the CUDA toolkit, and has no
// header on this project's build hosts, so gpu/nvml.cpp declares the few functions and structs it
// calls. Loading it costs milliseconds and starts no CUDA context, so node-check stays in seconds.
#include "gpu/driver_view.h"

namespace tp {

DriverView read_nvml();

// "00000000:9A:00.0" (NVML's bus id) as sysfs names the device: "0000:9a:00.0".
std::string sysfs_pci_address(const std::string& nvml_bus_id);

}  // namespace tp
