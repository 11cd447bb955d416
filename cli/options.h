// Option checks shared by the `wte` subcommands: whole numbers typed by the user, comma-separated
// lists, and output paths checked before any work; the usage-error type behind exit status 2 and
// the old option spellings kept as hidden aliases. Header-only, so tests/cli/test_cli_options.cc can
// test it directly.
#pragma once

#include <boost/program_options.hpp>

#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "src/io/config_usage_errors.h"
#include "src/io/file_checks.h"
#include "src/io/program_options_message.h"
#include "src/io/suggest.h"
#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/error.h"

namespace wte::cli {

/// Runs `run`, the body of the command `name` ("train", "profile loss"), and turns what it throws
/// into the message on stderr and the exit status every `wte` command shares:
///   UsageError         "wte NAME: error: MSG (see wte NAME --help)", 2 (no hint if MSG has one)
///   wte::Error, std::filesystem::filesystem_error   "wte NAME: error: MSG", 1
///   any other std::exception                        "wte NAME: internal error: MSG", 1
/// Otherwise returns what `run` returns.
template <typename Run>
int run_reporting_errors(const std::string& name, Run&& run) {
  try {
    return run();
  } catch (const UsageError& e) {
    const std::string m = e.what();
    if (m.find("--help") != std::string::npos)
      std::fprintf(stderr, "wte %s: error: %s\n", name.c_str(), m.c_str());
    else
      std::fprintf(stderr, "wte %s: error: %s (see wte %s --help)\n", name.c_str(), m.c_str(),
                   name.c_str());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "wte %s: error: %s\n", name.c_str(), e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "wte %s: error: %s\n", name.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wte %s: internal error: %s\n", name.c_str(), e.what());
    return 1;
  }
}

/// An old option spelling kept working: `old_name` (e.g. "--tokens") is read as `new_name`
/// (e.g. "--batch"). Hidden: --help shows only the new name.
struct Alias {
  const char* old_name;
  const char* new_name;
};

/// The arguments argv[1..argc) with every alias's old spelling ("--tokens X", "--tokens=X")
/// replaced by its new one. Arguments after a lone "--" are left alone (they are texts).
inline std::vector<std::string> with_aliases(int argc, char** argv, const std::vector<Alias>& aliases) {
  std::vector<std::string> out;
  bool texts = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") texts = true;
    if (!texts)
      for (const Alias& al : aliases) {
        const std::string o = al.old_name;
        if (a == o || a.rfind(o + "=", 0) == 0) {
          a = al.new_name + a.substr(o.size());
          break;
        }
      }
    out.push_back(a);
  }
  return out;
}

/// The command-line style of every `wte` command: Boost's unix_style without allow_guessing, so
/// an option is recognised only by its exact name ("--res" is not "--resume", "--train.step=3"
/// is not train.steps), as in an INI file.
inline int exact_style() {
  namespace cls = boost::program_options::command_line_style;
  return cls::unix_style & ~cls::allow_guessing;
}

/// "unknown option '--TYPED'" (the one wording of every command), with "; did you mean
/// '--NAME'?" for the closest long option of `options` (io::did_you_mean).
inline std::string unknown_option_message(const std::string& typed,
                                          const boost::program_options::options_description& options) {
  std::vector<std::string> names;
  for (const auto& d : options.options())
    if (!d->long_name().empty()) names.push_back("--" + d->long_name());
  return "unknown option '" + typed + "'" + io::did_you_mean(typed.substr(0, typed.find('=')), names);
}

/// How a `wte` command reads its command line and how its --help reads.
struct CommandSpec {
  /// The usage lines and what the command does, printed first by --help.
  std::string usage;
  /// Printed by --help after the options: "Example:\n  wte ...\n" (may be empty).
  std::string example;
  /// Old option spellings kept working (see with_aliases).
  std::vector<Alias> aliases;
  /// Options parsed but not listed by --help (e.g. the target of positional arguments).
  const boost::program_options::options_description* hidden = nullptr;
  /// Positional arguments, or nullptr if the command takes none.
  const boost::program_options::positional_options_description* positional = nullptr;
  /// If true, options the command does not declare and whose name holds a '.' are returned in
  /// CommandLine::overrides (the config overrides "--section.key=value" that wte's config loader
  /// checks) instead of being an error; any other undeclared option or argument still is one.
  bool config_overrides = false;
  /// Where --help prints; nullptr: nowhere (the command prints it with print_help itself, e.g.
  /// on MPI rank 0 only).
  std::ostream* help_out = &std::cout;
};

/// A parsed command line.
struct CommandLine {
  boost::program_options::variables_map vm;
  /// The undeclared options, in order, when CommandSpec::config_overrides is set.
  std::vector<std::string> overrides;
  /// --help (-h) was given: the help was printed to stdout and the command should return 0.
  bool help = false;
};

/// A command's --help: spec.usage, `options` (not spec.hidden) and spec.example.
inline void print_help(std::ostream& out, const boost::program_options::options_description& options,
                       const CommandSpec& spec) {
  out << spec.usage << options;
  if (!spec.example.empty()) out << "\n" << spec.example;
}

/// True if the argument `arg` reads as an option: "--x..." or "-x" with x a letter ("-3", "-",
/// "-0.5" do not: values may be negative numbers or "-").
inline bool looks_like_option(const std::string& arg) {
  return arg.size() >= 2 && arg[0] == '-' &&
         (arg[1] == '-' || std::isalpha(static_cast<unsigned char>(arg[1])));
}

/// Throws UsageError if an option of `parsed` took, as its value, the next argument and that
/// argument reads as an option (looks_like_option): `-o --train.steps=2` would otherwise create a
/// directory named "--train.steps=2", `--checkpoint --prompt x` read "--prompt" as a file name.
/// Names the option as typed and its long name; a value that starts with '-' is still given as
/// --name=VALUE (one argument).
inline void refuse_option_as_value(const boost::program_options::parsed_options& parsed) {
  for (const boost::program_options::option& o : parsed.options) {
    if (o.unregistered || o.position_key >= 0 || o.original_tokens.size() < 2) continue;
    const std::string& typed = o.original_tokens.front();
    const std::string& value = o.original_tokens.back();
    if (!looks_like_option(value)) continue;
    const std::string name = "--" + o.string_key;
    throw UsageError("option '" + typed + "'" + (typed == name ? "" : " (" + name + ")") +
                     " takes a value, but the argument after it, '" + value +
                     "', is an option; give the value right after " + typed + " (a value that "
                     "starts with '-' is written " + name + "=VALUE)");
  }
}

/// Throws UsageError for the first argument of `parsed` that is no option and no value of one, in
/// a command that takes no positional arguments: Boost's parser keeps such an argument apart and
/// nothing reads it, so `sample --prompt the cat sat` would sample from "the" alone. Names the
/// argument and, when it follows an option's value, that option, and says to quote a value
/// with spaces: `--prompt "the cat sat"`.
inline void refuse_stray_arguments(const boost::program_options::parsed_options& parsed) {
  const auto& opts = parsed.options;
  // An argument without an option name: Boost gives it no name (or a position).
  const auto stray_at = [&](size_t i) {
    return opts[i].position_key >= 0 || opts[i].string_key.empty();
  };
  const auto text_of = [&](size_t i) {
    const auto& o = opts[i];
    return !o.original_tokens.empty() ? o.original_tokens.front()
                                      : (o.value.empty() ? std::string() : o.value.front());
  };
  for (size_t i = 0; i < opts.size(); ++i) {
    if (!stray_at(i)) continue;
    const std::string stray = text_of(i);
    std::string m = "unexpected argument '" + stray + "': this command takes no arguments "
                    "without an option name";
    if (i > 0 && !stray_at(i - 1) && !opts[i - 1].value.empty()) {
      // The option before it and every stray argument after it: the value the user meant.
      const std::string name = "--" + opts[i - 1].string_key;
      const std::string value = opts[i - 1].value.back();
      std::string whole = value;
      for (size_t j = i; j < opts.size() && stray_at(j); ++j) {
        whole += " " + text_of(j);
      }
      m += "; " + name + " took '" + value + "' as its value; if '" + stray +
           "' belongs to it, quote the whole value: " + name + " \"" + whole + "\"";
    }
    throw UsageError(m);
  }
}

/// Parses argv[1..argc) (argv[0] is the command's name) for the options `options` and `spec`,
/// with exact option names only (exact_style). With --help, prints the help (print_help) to
/// *spec.help_out and returns with `help` set, before any value is checked.
/// Throws UsageError (exit status 2) with Boost's message, which names the option, for an unknown
/// option, a missing value, a value that does not parse, or a value that is the next argument and
/// reads as an option (refuse_option_as_value), or an argument without an option name in a
/// command without positional arguments (refuse_stray_arguments). With spec.config_overrides, an
/// undeclared option without a '.' is "unrecognised" as in any other command, and an argument
/// that is no option ("--train.steps 5" leaves "5") is "unexpected": config keys take '='.
inline CommandLine parse_command_line(int argc, char** argv,
                                      const boost::program_options::options_description& options,
                                      const CommandSpec& spec) {
  namespace po = boost::program_options;
  CommandLine cl;
  po::options_description all;
  all.add(options);
  if (spec.hidden) all.add(*spec.hidden);
  try {
    std::vector<std::string> args = with_aliases(argc, argv, spec.aliases), empty_keys;
    if (spec.config_overrides) {
      // Config keys with an empty value ("--train.snapshot_steps=") go straight to the config
      // loader: Boost's parser rejects an empty value after '='.
      std::vector<std::string> rest;
      for (const std::string& a : args) {
        const bool empty_key = a.rfind("--", 0) == 0 && a.size() > 3 && a.back() == '=' &&
                               a.find('=') == a.size() - 1 && a.find('.') != std::string::npos;
        (empty_key ? empty_keys : rest).push_back(a);
      }
      args = std::move(rest);
    }
    po::command_line_parser parser(args);
    parser.style(exact_style()).options(all);
    if (spec.positional) parser.positional(*spec.positional);
    if (spec.config_overrides) parser.allow_unregistered();
    const po::parsed_options parsed = parser.run();
    refuse_option_as_value(parsed);
    if (!spec.positional && !spec.config_overrides) refuse_stray_arguments(parsed);
    if (spec.config_overrides) {
      // Arguments that are no option are the positional options' (too many is an error), or,
      // for a command without them, collected here to be rejected below.
      cl.overrides = po::collect_unrecognized(
          parsed.options, spec.positional ? po::exclude_positional : po::include_positional);
      cl.overrides.insert(cl.overrides.end(), empty_keys.begin(), empty_keys.end());
    }
    po::store(parsed, cl.vm);
    if (cl.vm.count("help")) {
      if (spec.help_out) print_help(*spec.help_out, options, spec);
      cl.help = true;
      return cl;
    }
    po::notify(cl.vm);
  } catch (const po::multiple_occurrences& e) {
    // "inspect --checkpoint C extra": the extra argument is read as --checkpoint too; say so,
    // since the user gave the option once and "given twice" alone would not explain the error.
    std::string m = io::program_options_message(e);
    for (unsigned i = 0; spec.positional && i < spec.positional->max_total_count() && i < 8; ++i)
      if ("--" + spec.positional->name_for_position(i) == e.get_option_name()) {
        m += " (an argument without an option name is read as " + e.get_option_name() + ")";
        break;
      }
    throw UsageError(m);
  } catch (const po::invalid_command_line_syntax& e) {
    // Boost's "the required argument for option '--config' is missing" (`-c -o x`: Boost sees
    // an option where the value should be) and "... should follow immediately after the equal
    // sign" (`--prompt=`), in the words of refuse_option_as_value.
    // The option's long name ("--config") and short one ("-c"), whichever Boost names.
    std::string name = e.get_option_name(), shorter = name;
    for (const auto& d : all.options()) {
      const std::string s = d->canonical_display_name(po::command_line_style::allow_dash_for_short);
      if (name == "--" + d->long_name() || (name == s && s.rfind("--", 0) != 0)) {
        name = "--" + d->long_name();
        shorter = s;
      }
    }
    if (e.kind() == po::invalid_syntax::empty_adjacent_parameter)
      throw UsageError("option '" + name + "' is given an empty value ('" + name + "='); give " +
                       "a value after '=', or leave " + name + " out");
    if (e.kind() == po::invalid_syntax::missing_parameter) {
      const std::vector<std::string> args = with_aliases(argc, argv, spec.aliases);
      for (size_t i = 0; i + 1 < args.size(); ++i)
        if ((args[i] == name || args[i] == shorter) && looks_like_option(args[i + 1]))
          throw UsageError("option '" + args[i] + "'" + (args[i] == name ? "" : " (" + name + ")") +
                           " takes a value, but the argument after it, '" + args[i + 1] +
                           "', is an option; give the value right after " + args[i] +
                           " (a value that starts with '-' is written " + name + "=VALUE)");
      throw UsageError("option '" + name + "' takes a value, but none was given");
    }
    throw UsageError(io::program_options_message(e));
  } catch (const po::too_many_positional_options_error&) {
    // "inspect C extra": Boost says only "too many positional options have been specified".
    std::string names;
    const unsigned n = spec.positional ? spec.positional->max_total_count() : 0;
    for (unsigned i = 0; i < n && i < 8; ++i)
      names += (i ? ", --" : "--") + spec.positional->name_for_position(i);
    throw UsageError("too many arguments without an option name: this command takes " +
                     std::to_string(n) + " (read as " + names + "); quote a value that holds "
                     "spaces");
  } catch (const po::unknown_option& e) {
    throw UsageError(unknown_option_message(e.get_option_name(), all));
  } catch (const po::error& e) {
    throw UsageError(io::program_options_message(e));
  }
  for (const std::string& o : cl.overrides) {
    if (o.rfind("-", 0) != 0)
      throw UsageError("unexpected argument '" + o + "'; config keys are written "
                       "--section.key=value, with '='");
    if (o.rfind("--", 0) != 0 || o.substr(0, o.find('=')).find('.') == std::string::npos)
      throw UsageError(unknown_option_message(o, all));
  }
  return cl;
}

/// Throws UsageError "--NAME is required" for the first of `names` (option names without "--")
/// that `vm` does not hold.
inline void require_options(const boost::program_options::variables_map& vm,
                            std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (!vm.count(name)) throw UsageError(std::string("--") + name + " is required");
}

/// Parses `text`, the value typed for option `option` (e.g. "--vocab-size"), as a whole number
/// in [lo, hi]. Only decimal digits are accepted, all of them: no sign, no spaces, no junk
/// ("3x"), no exponent. Why not po::value<size_t>: Boost.Program_options reads "-3" into a size_t
/// as 2^64 - 3 and the command then crashes or allocates 2^64 bytes.
/// Throws UsageError naming the option, the value as typed and the allowed range, in the words of
/// the config keys' errors: "--vocab-size = '-3' is not a whole number; allowed: a whole number in
/// [1, 16777216]", "--repeat = '0' is out of range; allowed: a whole number in [1, 100000]".
inline uint64_t parse_whole_number(const std::string& option, const std::string& text, uint64_t lo,
                                   uint64_t hi) {
  uint64_t v = 0;
  const char* first = text.data();
  const char* last = first + text.size();
  // from_chars takes no '+' and no spaces; it would take a leading '-' only for signed types.
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const auto [end, ec] = std::from_chars(first, last, v);
  const std::string allowed =
      "; allowed: a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!digits || end != last || (ec != std::errc() && ec != std::errc::result_out_of_range))
    throw UsageError(option + " = '" + text + "' is not a whole number" + allowed);
  if (ec == std::errc::result_out_of_range || v < lo || v > hi)
    throw UsageError(option + " = '" + text + "' is out of range" + allowed);
  return v;
}

/// The file option `name` (without "--") of `vm`, or "" if it was not given. Throws UsageError if
/// it was given an empty value: `-c ""` (an unset shell variable) must not quietly mean "no file".
inline std::string file_option(const boost::program_options::variables_map& vm, const char* name) {
  if (!vm.count(name)) return "";
  const std::string v = vm[name].as<std::string>();
  if (v.empty())
    throw UsageError(std::string("--") + name + " is empty: give a file, or leave --" + name +
                     " out");
  return v;
}

/// The checkpoint file the `path` given for `option` ("--resume", "--init-from") names, checked
/// before any work: a regular file as it is; a run directory's newest checkpoint_<step>.h5 for
/// --init-from (as resolve_checkpoint does for --checkpoint). Throws wte::Error "OPTION 'PATH'
/// PROBLEM" (io::input_file_problem: "does not exist", "is not a regular file (a FIFO)", ...);
/// for a directory given to --resume the error says what to give instead (`--resume auto --out
/// DIR`), for one without checkpoints that it holds none.
inline std::string require_checkpoint_file(const std::string& option, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (option != "--resume") return wte::resolve_checkpoint(path, option + " ");
  std::string hint;
  if (fs::is_directory(path, ec))
    hint = "; to continue the run in that directory, give --resume auto --out " + path;
  io::require_input_file(option + " ", path, hint);
  return path;
}

/// The checkpoint file the `option` ("--checkpoint") value `path` names: a file as it is, a run
/// directory's newest checkpoint_<step>.h5 (wte::resolve_checkpoint). Throws wte::Error naming the
/// option and the path if it is neither (does not exist, /dev/null, a directory without
/// checkpoints).
inline std::string checkpoint_option(const std::string& option, const std::string& path) {
  return wte::resolve_checkpoint(path, option + " ");
}

/// The whole-number option `name` (without "--") of `vm`, declared as po::value<std::string>
/// (with a default, or checked with vm.count first), parsed by parse_whole_number in [lo, hi].
inline uint64_t whole_number_option(const boost::program_options::variables_map& vm,
                                    const std::string& name, uint64_t lo, uint64_t hi) {
  return parse_whole_number("--" + name, vm[name].as<std::string>(), lo, hi);
}

/// The items of a comma-separated list typed for `option` ("uniform,zipf:1.1" -> 2 items).
/// Throws UsageError naming the option if the list or any item is empty ("", "a,,b", "a,").
inline std::vector<std::string> split_list(const std::string& option, const std::string& text) {
  if (text.empty())
    throw UsageError(option + " is empty; allowed: one or more comma-separated items");
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty())
      throw UsageError(option + " = '" + text + "': item " + std::to_string(out.size() + 1) +
                  " is empty; allowed: comma-separated items, none empty");
    out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

/// Checks, before any work, that the file `path` given for `option` can be written later: its
/// directory exists, the path is not a directory or a special file (/dev/null, a FIFO, a device:
/// the atomic rename would replace it) and the file can be opened for writing. Leaves nothing behind: an existing
/// file is opened for appending (not truncated), a new one is created and removed again.
/// Throws wte::Error naming the option, the path and the reason.
inline void check_output_file(const std::string& option, const std::string& path) {
  namespace fs = std::filesystem;
  const std::string where = option + " " + path;
  if (path.empty()) throw Error(option + " is empty; allowed: a file path");
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(where + ": is a directory; allowed: a file path");
  // /dev/null, a FIFO, a device: wte writes an output as a new file and renames it over `path`,
  // which would replace the special file itself (as root, /dev/null became a regular file).
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    throw Error(where + ": " + io::input_file_problem(path) +
                "; wte writes its outputs as new files renamed into place, which would replace " +
                "it; allowed: a regular file path");
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec))
    throw Error(where + ": cannot create the file: " +
                (fs::exists(dir, ec) ? "'" + dir.string() + "' is not a directory"
                                     : "the directory '" + dir.string() + "' does not exist"));
  const bool existed = fs::exists(path, ec);
  {
    std::ofstream probe(path, std::ios::binary | std::ios::app);
    if (!probe) throw Error(where + ": cannot open the file for writing (permissions?)");
  }
  if (!existed) fs::remove(path, ec);
}

using io::same_file;

/// Checks, before any work, that the output file `path` given for `option` is none of `inputs`
/// (pairs of option and path, e.g. {"--checkpoint", "c.h5"}) under any spelling (a relative
/// path, "..", a symbolic or hard link), and that its temporary file path + ".tmp" (which
/// write_file_atomic truncates) is none of them either: a command must never destroy its input.
/// Throws UsageError (exit 2: options that cannot be combined) naming both options and paths.
inline void check_output_not_input(const std::string& option, const std::string& path,
                                   const std::vector<std::pair<std::string, std::string>>& inputs) {
  const auto same = same_file;
  for (const auto& [in_option, in_path] : inputs) {
    if (same(path, in_path))
      throw UsageError(option + " " + path + " is the same file as " + in_option + " " + in_path +
                  ": writing it would destroy the input; choose another output path");
    if (same(path + ".tmp", in_path))
      throw UsageError(option + " " + path + " would be written through the temporary file " + path +
                  ".tmp, which is " + in_option + " " + in_path +
                  ": that would destroy the input; choose another output path");
  }
}

/// The directory form of check_output_not_input, for a command that writes files into the
/// directory `dir` given for `option` (export, geometry): throws UsageError naming both options
/// if an input of `inputs` (pairs of option and path) is a file directly in `dir` (any spelling,
/// as same_file) whose name `writes` says the command may write there, or that file's NAME.tmp.
template <typename Writes>
void check_output_dir_not_input(const std::string& option, const std::string& dir,
                                const std::vector<std::pair<std::string, std::string>>& inputs,
                                Writes&& writes) {
  namespace fs = std::filesystem;
  for (const auto& [in_option, in_path] : inputs) {
    std::string name = fs::path(in_path).filename().string();
    const bool tmp = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
    if (tmp) name.resize(name.size() - 4);
    if (name.empty() || !writes(name)) continue;
    if (!same_file((fs::path(dir) / fs::path(in_path).filename()).string(), in_path)) continue;
    throw UsageError(in_option + " " + in_path + " is in " + option + " " + dir + ", where this "
                     "command writes '" + name + "'" + (tmp ? " through '" + name + ".tmp'" : "") +
                     ": writing it would destroy the input; choose another output directory");
  }
}

/// Creates the output directory `dir` given for `option` (and its parents) before any work, and
/// checks that files can be created in it. Throws wte::Error naming the option, the path and the
/// reason (e.g. a parent is a file: "--out /dev/null/x").
inline void prepare_output_dir(const std::string& option, const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string where = option + " " + dir;
  if (dir.empty()) throw Error(option + " is empty; allowed: a directory path");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(where + ": cannot create the directory: " + ec.message());
  if (!fs::is_directory(dir, ec)) throw Error(where + ": exists and is not a directory");
  const fs::path probe_path = fs::path(dir) / ".wte_write_probe";
  {
    std::ofstream probe(probe_path, std::ios::binary);
    if (!probe) throw Error(where + ": cannot create files in the directory (permissions?)");
  }
  fs::remove(probe_path, ec);
}

/// Removes the directory `dir` (if not "") when the scope is left by an exception and the
/// directory is still empty: an output directory a command created before its checks and work
/// (prepare_output_dir) is not left behind, empty, by an error. Give "" for a directory that
/// existed before.
class RemoveEmptyDirOnError {
 public:
  explicit RemoveEmptyDirOnError(std::string dir)
      : dir_(std::move(dir)), exceptions_(std::uncaught_exceptions()) {}
  ~RemoveEmptyDirOnError() {
    if (dir_.empty() || std::uncaught_exceptions() <= exceptions_) return;
    std::error_code ec;
    if (std::filesystem::is_empty(dir_, ec) && !ec) std::filesystem::remove(dir_, ec);
  }
  RemoveEmptyDirOnError(const RemoveEmptyDirOnError&) = delete;
  RemoveEmptyDirOnError& operator=(const RemoveEmptyDirOnError&) = delete;

 private:
  std::string dir_;
  int exceptions_;
};

/// Creates the missing parent directories of the output file `path` given for `option` (as
/// export and geometry create their --out directory) and, when the scope is left by an
/// exception, removes the ones it created that are still empty: an error leaves nothing behind.
/// Throws wte::Error naming the option, the path and the reason (a parent is a file:
/// "--out /dev/null/x.h5").
class OutputParentDirs {
 public:
  OutputParentDirs(const std::string& option, const std::string& path)
      : exceptions_(std::uncaught_exceptions()) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path dir = fs::path(path).parent_path();
    if (dir.empty() || fs::is_directory(dir, ec)) return;
    for (fs::path d = dir; !d.empty() && !fs::exists(d, ec); d = d.parent_path())
      created_.insert(created_.begin(), d);  // outermost first
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir, ec)) {
      remove_created();
      throw Error(option + " " + path + ": cannot create the directory '" + dir.string() +
                  "': " + (ec ? ec.message() : std::string("a parent is not a directory")));
    }
  }
  ~OutputParentDirs() {
    if (std::uncaught_exceptions() > exceptions_) remove_created();
  }
  OutputParentDirs(const OutputParentDirs&) = delete;
  OutputParentDirs& operator=(const OutputParentDirs&) = delete;

 private:
  void remove_created() {
    std::error_code ec;
    for (auto it = created_.rbegin(); it != created_.rend(); ++it)
      if (std::filesystem::is_empty(*it, ec) && !ec) std::filesystem::remove(*it, ec);
  }
  std::vector<std::filesystem::path> created_;  // outermost first
  int exceptions_;
};

}  // namespace wte::cli
