# lit configuration for tessel's golden IR tests (.tir files with RUN:/CHECK: lines).
import os
import lit.formats

config.name = "tessel"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".tir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.path.dirname(config.tessel_bin_dir), "tests", "lit-out")
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]

config.environment["PATH"] = os.pathsep.join(
    [config.tessel_bin_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.environment["OPENBLAS_NUM_THREADS"] = "1"
config.substitutions.append(("%tessel", os.path.join(config.tessel_bin_dir, "tessel")))
config.substitutions.append(("%python", config.python_executable))
