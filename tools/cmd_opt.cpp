// Placeholder: the 'opt' subcommand is being written (see tools/Commands.h).
#include "tools/Commands.h"
namespace tessel::tools {
void addOptCommand(CLI::App &) {}
} // namespace tessel::tools
