//===- PassOptions.h - pass-manager options of JIT compiles -----*- C++ -*-===//
//
// Every kernel the JIT compiles runs a named pipeline (mla-to-llvm-cpu,
// mla-to-nvvm) in-process; MLIR's pass-manager options make such a compile
// observable and replayable: -mlir-timing, -mlir-print-ir-after-all,
// -mlir-pass-statistics, -mlir-pass-pipeline-crash-reproducer=<file> (the
// reproducer runs again with `mla-opt --run-reproducer`).
//
// A tool (mla-run, mla-aot) registers them with registerJitPassOptions()
// before parsing its command line. A library that owns no command line
// (libMLACAPI.so, the Python package) takes them from $MLA_PASS_OPTIONS,
// tokenized like a command line ("-mlir-timing -mlir-print-ir-after=
// mla-plan-splits"), the first time a compile applies them.
//
// Header-only, shared by the CPU executor (MLACpuJit) and the GPU JIT
// (MLAGpuJit).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_JIT_PASSOPTIONS_H
#define MLA_JIT_PASSOPTIONS_H

#include "mla/Conversion/Passes.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>

namespace mla {

/// The environment variable a library reads the pass-manager options from.
inline constexpr const char *kPassOptionsEnvVar = "MLA_PASS_OPTIONS";

/// Registers MLIR's pass-manager and timing options with llvm::cl, and the
/// passes they may name (-mlir-print-ir-after=mla-plan-splits); a tool calls
/// it before cl::ParseCommandLineOptions.
inline void registerJitPassOptions() {
  mlir::registerAllPasses();
  registerMLAPasses();
  registerMLAConversionPasses();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
}

/// Puts the pass-manager options worth listing in a tool's --help into
/// `category`, for cl::HideUnrelatedOptions; the others (-mlir-print-ir-
/// module-scope, ...) stay accepted but unlisted.
inline void addJitPassOptionsToCategory(llvm::cl::OptionCategory &category) {
  auto &options = llvm::cl::getRegisteredOptions();
  for (llvm::StringRef name :
       {"mlir-timing", "mlir-print-ir-after-all", "mlir-print-ir-after",
        "mlir-print-ir-before", "mlir-pass-pipeline-crash-reproducer"})
    if (auto it = options.find(name); it != options.end())
      it->second->addCategory(category);
}

namespace detail {
/// Whether this process registered option `name` with llvm::cl (MLIR's
/// apply functions must only run after the registration).
inline bool isOptionRegistered(llvm::StringRef name) {
  return llvm::cl::getRegisteredOptions().count(name) != 0;
}

/// In a process whose command line has no pass-manager options (a library
/// loaded by C or Python), registers them and parses $MLA_PASS_OPTIONS into
/// them. Returns the parse errors, empty on success.
inline std::string parsePassOptionsFromEnvironment() {
  if (isOptionRegistered("mlir-print-ir-after-all"))
    return "";
  std::optional<std::string> text =
      llvm::sys::Process::GetEnv(kPassOptionsEnvVar);
  if (!text || llvm::StringRef(*text).trim().empty())
    return "";
  registerJitPassOptions();
  std::string errors;
  llvm::raw_string_ostream os(errors);
  const char *argv[] = {kPassOptionsEnvVar};
  if (!llvm::cl::ParseCommandLineOptions(1, argv, "", &os, nullptr,
                                         kPassOptionsEnvVar))
    return errors.empty() ? "cannot parse '" + *text + "'" : errors;
  return "";
}
} // namespace detail

/// Applies the pass-manager options (from the tool's command line, or from
/// $MLA_PASS_OPTIONS, parsed once per process) to a JIT compile's `pm`.
/// Fails with the parse errors of $MLA_PASS_OPTIONS, or when an option
/// cannot be applied (e.g. a local crash reproducer on a multithreaded
/// context).
inline llvm::Error applyJitPassOptions(mlir::PassManager &pm) {
  static const std::string envErrors =
      detail::parsePassOptionsFromEnvironment();
  if (!envErrors.empty())
    return llvm::createStringError(llvm::Twine(kPassOptionsEnvVar) + ": " +
                                   llvm::StringRef(envErrors).trim());
  if (detail::isOptionRegistered("mlir-print-ir-after-all") &&
      mlir::failed(mlir::applyPassManagerCLOptions(pm)))
    return llvm::createStringError(
        "cannot apply the pass-manager options to the JIT compile");
  if (detail::isOptionRegistered("mlir-timing"))
    mlir::applyDefaultTimingPassManagerCLOptions(pm);
  return llvm::Error::success();
}

} // namespace mla

#endif // MLA_JIT_PASSOPTIONS_H
