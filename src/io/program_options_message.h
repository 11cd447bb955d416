// The message of a Boost.Program_options error, safe for any input.
#pragma once

#include <boost/program_options/errors.hpp>

#include <map>
#include <string>

namespace wte::io {

/// e.what() without Boost 1.74's hang: error_with_option_name::what() substitutes placeholders
/// such as %invalid_line% or %canonical_option% with values taken from the input, in a loop that
/// replaces until the placeholder is gone, so a value that contains its own placeholder (a config
/// line or an argument holding "%invalid_line%") never ends (found by fuzz/fuzz_config). The
/// message is built from a copy whose substituted values have every '%' replaced by '?'.
inline std::string program_options_message(const boost::program_options::error& e) {
  namespace po = boost::program_options;
  const auto* named = dynamic_cast<const po::error_with_option_name*>(&e);
  if (named == nullptr) return e.what();
  // The substitutions are protected; a member pointer formed in a derived class reads them.
  struct Substitutions : po::error_with_option_name {
    static std::map<std::string, std::string>& of(po::error_with_option_name& err) {
      return err.*(&Substitutions::m_substitutions);
    }
  };
  po::error_with_option_name copy = *named;  // the template and substitutions; what() is the base's
  for (auto& [name, value] : Substitutions::of(copy))
    for (char& c : value)
      if (c == '%') c = '?';
  return copy.what();
}

}  // namespace wte::io
