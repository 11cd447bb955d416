// The user's own config header, named like wte's private src/io/config.cc's old home.
#pragma once
struct Config {  // a different type, in the global namespace, than wte::Config
  int app_setting = 42;
};
