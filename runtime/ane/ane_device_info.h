/*
 * The ANE architecture, as the framework itself reports it: the class
 * _ANEDeviceInfo answers class methods only, and of them the ones that name
 * the device are probed in order (docs/ane-backend.md, "The ANE
 * architecture"): +aneArchitectureType ("h16g"), then +aneSubType ("h16").
 * The names are from the class's dumped interface (the Runtime-Headers
 * collections of AppleNeuralEngine.framework) and from peers that call them
 * on M3, M4 and M5 Macs (peers.md §4.1: key decisions on _ANEDeviceInfo's
 * strings). Each is checked with respondsToSelector: first, the answer
 * with -UTF8String; what was found, or why nothing was, is kept for -v.
 */
#ifndef ORION_ANE_DEVICE_INFO_H
#define ORION_ANE_DEVICE_INFO_H

#include <stddef.h>

#include "ane_framework.h"

#define ANE_DEVICE_INFO_CLASS "_ANEDeviceInfo"

typedef struct AneArchitecture {
  char name[72];   /* "h16g"; "unknown" when the framework does not say */
  char found[400]; /* "+[_ANEDeviceInfo aneArchitectureType]", or why "unknown" */
} AneArchitecture;

/* The selectors probed, in order; n is set to their count. */
const char *const *ane_device_info_architecture_selectors(size_t *n);

/* Asks fw's _ANEDeviceInfo (inside an autorelease pool of its own). */
void ane_device_architecture(const AneFramework *fw, AneArchitecture *out);

/* name as a cache file name component (ane_update_cache.h): at most 64 of
 * letters, digits, '.', '_', '-' (anything else '_'), "unknown" if empty. */
void ane_device_name_copy(char *out, size_t len, const char *name);

/* "ANE architecture h16g (+[_ANEDeviceInfo aneArchitectureType]; probed in
 * order: +aneArchitectureType, +aneSubType)": the backend's -v line. */
void ane_device_architecture_describe(const AneArchitecture *a, char *out, size_t len);

#endif
