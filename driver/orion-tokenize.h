/*
 * Subcommands of orion-tokenize that live in files of their own.
 */
#ifndef ORION_TOKENIZE_H
#define ORION_TOKENIZE_H

/* `orion-tokenize train --vocab-size N TEXT_FILE... -o DIR` (argv[0] is
 * "train"): learns a byte-level BPE (orion_bpe_train) and writes DIR's
 * vocab.json and merges.txt. Returns the exit status (0, 1 errors, 2 usage). */
int orion_tokenize_train_cmd(int argc, char **argv);

#endif
