#pragma once
// One function per subcommand; each parses its own arguments (cxxopts, with --help) and calls the library.
// argv[0] is the subcommand name. Return the process exit code; throw spread::UserError for bad input (exit 2).
namespace spread::cli {

int cmd_train(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_encode(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_compare(int argc, char** argv);
int cmd_diagnose(int argc, char** argv);
int cmd_report(int argc, char** argv);
int cmd_pool(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);
int cmd_export(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_mine(int argc, char** argv);
int cmd_split(int argc, char** argv);
int cmd_recipe(int argc, char** argv);

}  // namespace spread::cli
