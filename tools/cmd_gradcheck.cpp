// Placeholder: the 'gradcheck' subcommand is being written (see tools/Commands.h).
#include "tools/Commands.h"
namespace tessel::tools {
void addGradcheckCommand(CLI::App &) {}
} // namespace tessel::tools
