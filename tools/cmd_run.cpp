// Placeholder: the 'run' subcommand is being written (see tools/Commands.h).
#include "tools/Commands.h"
namespace tessel::tools {
void addRunCommand(CLI::App &) {}
} // namespace tessel::tools
