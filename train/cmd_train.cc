// Placeholder so the tool links while `wte train` is being written in this same change.
#include "src/error.h"
#include "train/commands.h"
namespace wte::cli {
int cmd_train(int, char**) { throw Error("wte train is not built yet"); }
}  // namespace wte::cli
