// Placeholder: the 'bench' subcommand is being written (see tools/Commands.h).
#include "tools/Commands.h"
namespace tessel::tools {
void addBenchCommand(CLI::App &) {}
} // namespace tessel::tools
