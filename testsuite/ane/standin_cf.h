/*
 * How the stand-in's classes read the CoreFoundation objects the backend
 * passes them (standin_iosurface.c makes them): each accessor answers NULL
 * (or false, or -1) for an object of another kind, as a type check.
 */
#ifndef ORION_STANDIN_CF_H
#define ORION_STANDIN_CF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

const char *standin_cf_string(const void *object);
const uint8_t *standin_cf_data(const void *object, size_t *len);
bool standin_cf_number(const void *object, int64_t *value);
/* An array's or a dictionary's count. */
long standin_cf_count(const void *object);
const void *standin_cf_array_at(const void *array, long i);
const void *standin_cf_dictionary_key(const void *dict, long i);
const void *standin_cf_dictionary_value(const void *dict, long i);
/* The value under a string key, by content. */
const void *standin_cf_dictionary_get(const void *dict, const char *key);

/* Surfaces IOSurfaceCreate made since the stand-in was loaded (the tests
 * read it with dlsym, as ane_standin_compile_count). */
unsigned long ane_standin_surface_count(void);

#endif
