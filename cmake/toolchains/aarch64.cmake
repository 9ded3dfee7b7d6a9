# 64-bit Arm (Debian arm64): gcc-aarch64-linux-gnu, run under qemu-aarch64
# (qemu-user). See docs/portability.md.
set(yard_arch aarch64)
set(yard_triplet aarch64-linux-gnu)
set(yard_multiarch aarch64-linux-gnu)
set(yard_emulator qemu-aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
