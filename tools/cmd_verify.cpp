// Placeholder: the 'verify' subcommand is being written (see tools/Commands.h).
#include "tools/Commands.h"
namespace tessel::tools {
void addVerifyCommand(CLI::App &) {}
} // namespace tessel::tools
