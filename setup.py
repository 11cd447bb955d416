"""Builds the Python module `wte` with CMake, for `pip install --no-build-isolation .`.

setuptools calls build_ext; this one configures the source tree with CMake (Release, no tests, no
command-line tool, no install rules, no MPI; ccache when it is installed) in build-python/ beside
build/, kept between installs so a second install rebuilds only what changed, then builds the
target wte_python (the extension and the libraries it links) and copies the extension into the
package. build-python/ sits at the depth of build/, so ccache (with base_dir above the source
tree) reuses the objects a Release build in build/ compiled; a later install with the same
arguments skips the configure step. Environment: WTE_PYTHON_BUILD_DIR
(another build directory), CMAKE_BUILD_PARALLEL_LEVEL (build jobs; default: the CPU count),
WTE_CMAKE_ARGS (extra CMake arguments, split on spaces).
"""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE_DIR = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            sys.exit("wte: building the Python module needs CMake >= 3.25 (apt install cmake)")
        build_dir = (os.environ.get("WTE_PYTHON_BUILD_DIR")
                     or os.path.join(SOURCE_DIR, "build-python"))
        configure = [
            "cmake", "-S", SOURCE_DIR, "-B", build_dir,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_TESTING=OFF",
            "-DWTE_INSTALL=OFF",
            "-DWTE_MPI=OFF",
            "-DWTE_FAULT_INJECTION=OFF",
            "-DWTE_PYTHON=ON",
            # The interpreter itself, not a venv's link to it: the same arguments from every venv
            # of one Python, so a rebuild skips the configure step (below).
            f"-DPython3_EXECUTABLE={os.path.realpath(sys.executable)}",
        ]
        if shutil.which("ccache"):
            configure += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
                          "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
        configure += os.environ.get("WTE_CMAKE_ARGS", "").split()
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        # Configured before with the same arguments: `cmake --build` re-runs CMake itself if a
        # CMakeLists.txt changed, so the configure step (15 s on a busy machine) is skipped.
        stamp = os.path.join(build_dir, "wte-pip-configure.txt")
        args_text = "\n".join(configure) + "\n"
        configured = os.path.exists(os.path.join(build_dir, "CMakeCache.txt")) and \
            os.path.exists(stamp) and open(stamp).read() == args_text
        if not configured:
            subprocess.run(configure, check=True)
            with open(stamp, "w") as f:
                f.write(args_text)
        subprocess.run(["cmake", "--build", build_dir, "--target", "wte_python", "-j", jobs],
                       check=True)
        package_dir = os.path.join(build_dir, "python", "wte")
        built = [f for f in os.listdir(package_dir) if f.startswith("_wte.") and f.endswith(".so")]
        if len(built) != 1:
            sys.exit(f"wte: expected one _wte.*.so in {package_dir}, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(package_dir, built[0]), target)


setup(
    packages=["wte"],
    package_dir={"wte": "python/wte"},
    ext_modules=[CMakeExtension("wte._wte")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
    # setuptools' own build files beside the CMake tree, not in build/ (the usual CMake build tree).
    options={"build": {"build_base": os.path.join("build-python", "setuptools")}},
)
