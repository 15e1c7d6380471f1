// ringcachectl: the admin CLI of ringcache (docs/design.md §8). Everything happens in cli.cc and
// commands.cc; this file only hands over the process's streams. Single-threaded.
#include <unistd.h>

#include <iostream>

#include "tools/ctl/cli.h"

int main(int argc, char** argv) {
  ringcache::ctl::CtlIo io;
  io.in = &std::cin;
  io.out = &std::cout;
  io.err = &std::cerr;
  io.in_is_terminal = isatty(STDIN_FILENO) == 1;
  return ringcache::ctl::RunCtl(argc, argv, io);
}
