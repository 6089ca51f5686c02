# The Debian package: `cpack -G DEB` in a build tree makes
# stoke_<version>_<arch>.deb, for the C user: the CLI, libstoke (shared and
# static), stoke.h, the pkg-config file, the CMake package, stoke(1) and the
# bash completion, under /usr.  The Python module is left out (component
# "python"): Python users install with pip (pyproject.toml), into their
# interpreter or venv.  tests/install/test_deb.sh installs it with dpkg -i,
# builds a program against it with pkg-config, and removes it.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME stoke)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "stoke developers <stoke@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "keeps an accelerator fed, and tells you when it is not")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "A data loader and its doctor for accelerator training: worker threads\n\
read, decode and transform samples into pinned batch buffers, and the\n\
loader measures whether each step waits for data and what to do about it.\n\
This package holds the stoke command, libstoke, its header, pkg-config\n\
file and CMake package, the man page and the bash completion.")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# What the library and the CLI link (Debian 12's runtime packages); the
# static library's users also need libjpeg62-turbo-dev, libspng-dev and
# zlib1g-dev
# for pkg-config --static, as the .pc file's Requires.private says
# (and libcurl4-openssl-dev for -lcurl).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6 (>= 2.34), libjpeg62-turbo (>= 1:2.1), libspng0 (>= 0.7), libcjson1 (>= 1.7), libcurl4 (>= 7.85), zlib1g (>= 1:1.2.11)")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libjpeg62-turbo-dev, libspng-dev, zlib1g-dev, libcurl4-openssl-dev")
# Everything but the Python module: only the default component of this
# build tree (CPack's BUILD_DIR;PROJECT;COMPONENT;SUBDIR).
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};stoke;Unspecified;/")
include(CPack)
