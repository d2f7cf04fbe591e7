/* Why the ane backend cannot be opened on a build that is not for macOS:
 * the placeholder entry's reason (backend_ane.c), and the real entry's where
 * the Linux stand-in is built but ORION_ANE_FRAMEWORK names no framework
 * (ane/ane_backend.c), so both builds say the same. */
#ifndef ORION_ANE_UNAVAILABLE_H
#define ORION_ANE_UNAVAILABLE_H

#define ORION_ANE_NOT_MACOS                                                                                   \
  "the ane backend is only available on macOS (Apple's Neural Engine, through the private "                 \
  "AppleNeuralEngine.framework), and this build is not for macOS"

#endif
