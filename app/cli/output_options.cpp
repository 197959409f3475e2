#include "app/cli/output_options.h"

#include "common/errors.h"
#include "common/files.h"
#include "trace/trace_file.h"

namespace tp {

SideOutputs side_outputs_from(const boost::program_options::variables_map& options,
                              bool check_files) {
  const auto text = [&options](const char* name) {
    return options.count(name) ? options[name].as<std::string>() : std::string();
  };
  SideOutputs outputs;
  outputs.junit = text("junit");
  outputs.metrics = text("metrics");
  outputs.strict = options.count("strict") && options["strict"].as<bool>();
  if (!check_files) return outputs;
  const std::string report = text("report");
  for (const auto& [option, path] :
       {std::pair{"--junit", outputs.junit}, std::pair{"--metrics", outputs.metrics}}) {
    if (path.empty()) continue;
    if (path == report)
      throw UsageError(std::string(option) + " '" + path + "' is the --report file");
    check_output_file(option, path);
  }
  const std::string trace = trace_path_for(text("trace"), report);
  if (!trace.empty()) {
    for (const auto& [option, path] :
         {std::pair{"--report", report}, std::pair{"--junit", outputs.junit},
          std::pair{"--metrics", outputs.metrics}})
      if (path == trace)
        throw UsageError("--trace '" + trace + "' is the " + option + " file; give --trace FILE");
    check_output_file("--trace", trace);
  }
  if (!outputs.junit.empty() && outputs.junit == outputs.metrics)
    throw UsageError("--junit and --metrics name the same file '" + outputs.junit + "'");
  return outputs;
}

}  // namespace tp
