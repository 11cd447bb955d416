// The `wte` tool's subcommands. Each takes the arguments after its own name (argv[0] is the
// subcommand name), prints its own --help, and returns the process exit code:
// 0 success, 1 a failed check or a runtime error, 2 bad usage.
#pragma once

namespace wte::cli {

int cmd_train(int argc, char** argv);     // cli/cmd_train.cc
int cmd_tokenize(int argc, char** argv);  // cli/cmd_tokenize.cc
int cmd_prepare(int argc, char** argv);   // cli/cmd_prepare.cc
int cmd_inspect(int argc, char** argv);   // cli/cmd_inspect.cc
int cmd_profile(int argc, char** argv);   // cli/cmd_profile.cc
int cmd_profile_comm(int argc, char** argv);  // cli/cmd_profile_comm.cc (`wte profile comm`)
int cmd_profile_loss(int argc, char** argv);  // cli/cmd_profile_loss.cc (`wte profile loss`)
int cmd_gradcheck(int argc, char** argv); // cli/cmd_gradcheck.cc
int cmd_grad(int argc, char** argv);      // cli/cmd_grad.cc
int cmd_geometry(int argc, char** argv);       // cli/cmd_geometry.cc
int cmd_hidden_states(int argc, char** argv);  // cli/cmd_hidden_states.cc
int cmd_sample(int argc, char** argv);         // cli/cmd_sample.cc
int cmd_import(int argc, char** argv);         // cli/cmd_import.cc
int cmd_export(int argc, char** argv);         // cli/cmd_export.cc
int cmd_eval(int argc, char** argv);           // cli/cmd_eval.cc

}  // namespace wte::cli
