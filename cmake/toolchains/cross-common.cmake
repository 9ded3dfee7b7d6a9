# Shared by the cross toolchain files (i386.cmake, aarch64.cmake, s390x.cmake):
# Debian's cross compiler <triplet>-gcc with its own C library in
# /usr/<triplet>, the third-party libraries of that architecture unpacked
# by tests/cross/sysroot into build/cross-sysroot/<arch>, linked statically
# (the binaries then run under qemu-user, or natively for i386, without a
# foreign dynamic loader and libraries installed on the host).
# Set before including: yard_arch, yard_triplet, yard_multiarch, and
# yard_emulator (empty: the host runs the binaries itself).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${yard_arch})
set(CMAKE_C_COMPILER ${yard_triplet}-gcc)
set(CMAKE_ASM_COMPILER ${yard_triplet}-gcc)
set(CMAKE_AR ${yard_triplet}-ar CACHE FILEPATH "")
set(CMAKE_RANLIB ${yard_triplet}-ranlib CACHE FILEPATH "")
set(CMAKE_NM ${yard_triplet}-nm CACHE FILEPATH "")

get_filename_component(yard_libs "${CMAKE_CURRENT_LIST_DIR}/../../build/cross-sysroot/${yard_arch}" ABSOLUTE)
if(NOT EXISTS "${yard_libs}/.stamp")
    message(FATAL_ERROR "${yard_libs} is missing: run tests/cross/sysroot ${yard_arch} (make test-cross does)")
endif()

set(CMAKE_FIND_ROOT_PATH /usr/${yard_triplet} ${yard_libs})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE ${yard_multiarch})

# pkg-config answers for the target's .pc files, with their paths moved
# under the unpacked tree.
set(ENV{PKG_CONFIG_LIBDIR} "${yard_libs}/usr/lib/${yard_multiarch}/pkgconfig:${yard_libs}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${yard_libs}")
set(ENV{PKG_CONFIG_PATH} "")

# The unpacked headers, the architecture's own (OpenSSL's opensslconf.h)
# in the multiarch directory first. Not a cached flag: a build directory
# configured before a header moved there picks it up too.
set(CMAKE_C_STANDARD_INCLUDE_DIRECTORIES ${yard_libs}/usr/include/${yard_multiarch}
    ${yard_libs}/usr/include)
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static -L${yard_libs}/usr/lib/${yard_multiarch}")

if(yard_emulator)
    find_program(yard_emulator_path ${yard_emulator} REQUIRED)
    # The target's own C.UTF-8 locale (glibc refuses locale files of the
    # other byte order: the host's would fail setlocale on s390x).
    set(CMAKE_CROSSCOMPILING_EMULATOR ${yard_emulator_path} -E LOCPATH=${yard_libs}/usr/lib/locale)
endif()
