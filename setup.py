"""The pip build of stoke: setuptools drives the project's CMake build.

The extension stoke._stoke and the `stoke` command are built by CMake (the
same build as scripts/build.sh, without the tests) for the interpreter that
runs this file, and copied into the package: stoke/_stoke*.so and
stoke/_bin/stoke, which the `stoke` console script runs (stoke/_cli.py).
The version is read from CMakeLists.txt, the one place it is written.

Environment: STOKE_CMAKE_ARGS adds arguments to CMake's configure step,
CMAKE_BUILD_PARALLEL_LEVEL sets the build's jobs (default: the CPUs).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def cmake_version():
    with open(os.path.join(HERE, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"^project\(stoke VERSION ([0-9]+\.[0-9]+\.[0-9]+)",
                      f.read(), re.M)
    if not m:
        raise RuntimeError("CMakeLists.txt: no project(stoke VERSION x.y.z)")
    return m.group(1)


class CMakeBuild(build_ext):
    """Builds stoke._stoke (and the CLI) with CMake instead of compiling
    the extension's sources itself."""

    def build_extension(self, ext):
        build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(build_dir, exist_ok=True)
        configure = [
            "cmake", "-S", HERE, "-B", build_dir,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DSTOKE_BUILD_TESTS=OFF",
            "-DSTOKE_BUILD_PYTHON=ON",
            "-DSTOKE_PYTHON=" + sys.executable,
        ] + shlex.split(os.environ.get("STOKE_CMAKE_ARGS", ""))
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        build = ["cmake", "--build", build_dir, "-j", jobs,
                 "--target", "stoke_python", "stoke-cli"]
        for cmd in (configure, build):
            self.announce(" ".join(cmd), level=2)
            subprocess.check_call(cmd)
        # The module CMake built, under the name setuptools expects.
        pkg = os.path.join(build_dir, "python", "stoke")
        built = [f for f in os.listdir(pkg)
                 if f.startswith("_stoke") and f.endswith(".so")]
        if len(built) != 1:
            raise RuntimeError(f"{pkg}: expected one _stoke*.so, found {built}")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.join(pkg, built[0]), dest)
        # The command-line tool, run by the `stoke` console script.
        bindir = os.path.join(os.path.dirname(dest), "_bin")
        os.makedirs(bindir, exist_ok=True)
        shutil.copy2(os.path.join(build_dir, "stoke"), os.path.join(bindir, "stoke"))


setup(
    version=cmake_version(),
    packages=["stoke"],
    package_dir={"stoke": "python/stoke"},
    package_data={"stoke": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("stoke._stoke", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own build tree beside CMake's build/, never inside it.
    options={"build": {"build_base": "build-pip"},
             "egg_info": {"egg_base": "build-pip"}},
    zip_safe=False,
)
