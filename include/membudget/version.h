/* membudget version and export macros. Included by membudget.h. */
#ifndef MEMBUDGET_VERSION_H
#define MEMBUDGET_VERSION_H

/* The single source of the version: CMake parses these three lines. */
#define MB_VERSION_MAJOR 0
#define MB_VERSION_MINOR 1
#define MB_VERSION_PATCH 0

#define MB_VERSION_NUMBER (MB_VERSION_MAJOR * 10000 + MB_VERSION_MINOR * 100 + MB_VERSION_PATCH)
#define MB_STRINGIFY_(x) #x
#define MB_STRINGIFY(x) MB_STRINGIFY_(x)
#define MB_VERSION_STRING \
  MB_STRINGIFY(MB_VERSION_MAJOR) "." MB_STRINGIFY(MB_VERSION_MINOR) "." MB_STRINGIFY(MB_VERSION_PATCH)

/* MB_API marks the exported symbols; everything else is hidden. */
#if defined(_WIN32)
#  if defined(MB_BUILDING_LIBRARY)
#    define MB_API __declspec(dllexport)
#  elif defined(MB_SHARED)
#    define MB_API __declspec(dllimport)
#  else
#    define MB_API
#  endif
#elif defined(__GNUC__)
#  define MB_API __attribute__((visibility("default")))
#else
#  define MB_API
#endif

#endif
