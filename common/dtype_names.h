#pragma once
// Element types under one name each (docs/report.md, "Names"): every common spelling is accepted
// in every option (model.dtype, sweep.dtype), and reports and summaries print the one name;
// nccl-tests' table alone keeps nccl-tests' names.
#include <string>

namespace tp {

// "float32" for fp32, float32, float, f32; "bfloat16" for bf16, bfloat16; "float16" for fp16,
// float16, half, f16; "int32" for int32, i32, int. Case does not matter; "" for anything else.
std::string dtype_name(const std::string& spelling);

}  // namespace tp
