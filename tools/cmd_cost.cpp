// Placeholder: the 'cost' subcommand is being written (see tools/Commands.h).
#include "tools/Commands.h"
namespace tessel::tools {
void addCostCommand(CLI::App &) {}
} // namespace tessel::tools
