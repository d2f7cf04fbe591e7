/*
 * The training-contract tests' shared refusal check (contract_check.c), used by
 * test_train_contract.c, test_train_lora_contract.c, test_train_groups.c and
 * test_train_rows.c. It asserts with Criterion inside.
 */
#ifndef ORION_TEST_CONTRACT_CHECK_H
#define ORION_TEST_CONTRACT_CHECK_H

/* `manifest` with the first `from` after the first `after` replaced by `to`,
 * read as the text of "P/Manifest.plist", must be refused with exactly `want`
 * (the message after "error: P/Manifest.plist: manifest: "). */
void contract_refused(const char *manifest, const char *after, const char *from, const char *to, const char *want);

#endif
