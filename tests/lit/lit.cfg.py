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

# tessel trg over MPI (tests that say REQUIRES: mpi): an MPI build and its launcher. As root and
# on a machine with fewer cores than ranks, mpirun needs to be told that both are intended.
if config.mpiexec:
    config.available_features.add("mpi")
    # A hung job fails its test instead of blocking the suite (every MPI test checks what
    # the job printed, which a killed job has not).
    mpirun = "timeout -k 10 300 " + config.mpiexec + " --allow-run-as-root --oversubscribe"
    # Under AddressSanitizer (the asan preset sets ASAN_OPTIONS) the ranks keep its memory
    # checks but not leak detection: OpenMPI's components leave allocations behind at
    # MPI_Finalize, in libraries already unloaded, which no suppression can name.
    if "ASAN_OPTIONS" in os.environ:
        mpirun += " -x ASAN_OPTIONS=" + os.environ["ASAN_OPTIONS"] + ":detect_leaks=0"
    config.substitutions.append(("%mpirun", mpirun))
    # Some containers forbid the cross-memory attach of OpenMPI's shared-memory transport.
    config.environment["OMPI_MCA_btl_vader_single_copy_mechanism"] = "none"

# scripts/plot_sweep.py (tests that say REQUIRES: matplotlib).
if config.plot_python:
    config.available_features.add("matplotlib")
    config.substitutions.append(
        ("%plot_sweep", config.plot_python + " " + os.path.join(config.source_root, "scripts", "plot_sweep.py")))
