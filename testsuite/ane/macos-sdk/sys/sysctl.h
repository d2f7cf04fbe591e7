/* sysctlbyname as macOS declares it, for a compile check on Linux (../README.md). */
#pragma once
#include <stddef.h>

int sysctlbyname(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
