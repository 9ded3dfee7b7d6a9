/* Which sanitizers are compiled in, for the fiber annotations. */
#ifndef YARD_CORO_SANITIZER_H
#define YARD_CORO_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#define YARD_CORO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define YARD_CORO_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define YARD_CORO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define YARD_CORO_TSAN 1
#endif
#endif

#ifdef YARD_CORO_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef YARD_CORO_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#endif
