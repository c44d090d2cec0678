// Placeholder: the 'prepare' subcommand is being written (see tools/Commands.h).
#include "tools/Commands.h"
namespace tessel::tools {
void addPrepareCommand(CLI::App &) {}
} // namespace tessel::tools
