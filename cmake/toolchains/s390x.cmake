# IBM Z (Debian s390x), 64-bit big-endian: gcc-s390x-linux-gnu, run under
# qemu-s390x (qemu-user). See docs/portability.md.
set(yard_arch s390x)
set(yard_triplet s390x-linux-gnu)
set(yard_multiarch s390x-linux-gnu)
set(yard_emulator qemu-s390x)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
