/*
 * orion-tokenize's subcommands in files of their own.
 */
#ifndef ORION_TOKENIZE_H
#define ORION_TOKENIZE_H

/* `orion-tokenize train ...` (argv[0] is "train"): learns a byte-level BPE
 * (orion_bpe_train) and writes it in Hugging Face's files; the exit status. */
int orion_tokenize_train_cmd(int argc, char **argv);

#endif
