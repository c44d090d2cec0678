// Placeholder: the 'emit' subcommand is being written (see tools/Commands.h).
#include "tools/Commands.h"
namespace tessel::tools {
void addEmitCommand(CLI::App &) {}
} // namespace tessel::tools
