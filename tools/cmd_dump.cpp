// Placeholder: the 'dump' subcommand is being written (see tools/Commands.h).
#include "tools/Commands.h"
namespace tessel::tools {
void addDumpCommand(CLI::App &) {}
} // namespace tessel::tools
