// Placeholder: the 'trg' subcommand is being written (see tools/Commands.h).
#include "tools/Commands.h"
namespace tessel::tools {
void addTrgCommand(CLI::App &) {}
} // namespace tessel::tools
