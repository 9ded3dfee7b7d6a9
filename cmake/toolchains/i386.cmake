# 32-bit x86 (Debian i386): gcc-i686-linux-gnu. The x86-64 kernel runs the
# static binaries natively, so no emulator. See docs/portability.md.
set(yard_arch i386)
set(yard_triplet i686-linux-gnu)
set(yard_multiarch i386-linux-gnu)
set(yard_emulator "")
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
