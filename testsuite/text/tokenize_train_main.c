/*
 * A stand-in for orion-tokenize's main until it exists in this tree: runs
 * `train` (orion_tokenize_train_cmd) so that testsuite/cli/tokenize_train.sh
 * tests the command line as users type it: tokenize_train_main train ARGS...
 */
#include <stdio.h>
#include <string.h>

#include "orion-tokenize.h"

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "train") != 0) {
    fprintf(stderr, "usage: %s train ARGS...\n", argv[0]);
    return 2;
  }
  return orion_tokenize_train_cmd(argc - 1, argv + 1);
}
