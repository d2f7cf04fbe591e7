/*
 * How a LoRA adapter file's tensors name the inputs `orionc --lora` makes
 * (runtime/lora_names.c): one rule for `orion-run --adapter` and for the
 * start values of `orion-run train --lora --adapter` (docs/lora.md).
 */
#ifndef ORION_LORA_NAMES_H
#define ORION_LORA_NAMES_H

#include <stdbool.h>
#include <stdint.h>

/* Does `name` end in ".lora_A" or ".lora_B" (an adapter input)? */
bool orion_lora_is_input(const char *name);

/* A PEFT key without its "base_model.model." (or "base_model.") prefix, its
 * ".weight" and its ".default" adapter name:
 * "base_model.model.h.0.attn.c_attn.lora_A.default.weight" ->
 * "h.0.attn.c_attn.lora_A". The caller frees it. */
char *orion_lora_key_name(const char *key);

/* Which of the n names `name` (a key's name, above) is for: the same name,
 * or else (a Hugging Face model nests its modules one level deeper than the
 * program may: "model.layers.0.q_proj" for "layers.0.q_proj") the adapter
 * input with the longest name that ends `name` at a dot. n when none. */
uint32_t orion_lora_match(const char *name, const char *const *names, uint32_t n);

#endif
