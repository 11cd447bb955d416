"""Builds the Python module `wte` with CMake, for `pip install --no-build-isolation .`.

setuptools calls build_ext; this one builds the CMake target wte_python (the extension and the
libraries it links, nothing else) and copies the extension into the package. The build directory:
  * WTE_BUILD_DIR, if set: used as it is when it holds a CMake build of this source tree (a
    build you made; it must have the Python module on, for this Python), else configured there;
  * else ./build, when it is a Release build of this source tree with the Python module for this
    Python (the README's `cmake -S . -B build`): only what the module still needs is compiled;
  * else build-python/ beside build/, configured by this file (Release, no tests, no command-line
    tool, no install rules, no MPI; ccache when installed) and kept between installs, so a second
    install rebuilds only what changed. build-python/ sits at the depth of build/, so ccache (with
    base_dir above the source tree) reuses the objects a Release build in build/ compiled.
CMake's own output (configure and build progress) goes to stderr, which `pip install -v` shows.
Environment: WTE_BUILD_DIR (above; WTE_PYTHON_BUILD_DIR is read as well), CMAKE_BUILD_PARALLEL_LEVEL
(build jobs; default: the CPU count), WTE_CMAKE_ARGS (extra CMake arguments for a directory this
file configures, split on spaces).
"""
import os
import shutil
import subprocess
import sys
import time

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE_DIR = os.path.dirname(os.path.abspath(__file__))


def say(text):
    """A line on stderr, prefixed "wte:" (pip shows it with -v, and with any failure)."""
    print("wte: " + text, file=sys.stderr, flush=True)


def cmake_cache(build_dir):
    """{name: value} of build_dir/CMakeCache.txt, or None if there is none."""
    path = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.isfile(path):
        return None
    cache = {}
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("#", "//")) or "=" not in line or ":" not in line.split("=", 1)[0]:
                continue
            key, value = line.rstrip("\n").split("=", 1)
            cache[key.split(":", 1)[0]] = value
    return cache


def unusable(cache, python):
    """Why a configured build directory cannot build this install's module, or "" if it can."""
    home = cache.get("CMAKE_HOME_DIRECTORY", "")
    if not home or os.path.realpath(home) != os.path.realpath(SOURCE_DIR):
        return f"it builds another source tree ({home or 'unknown'})"
    if cache.get("WTE_PYTHON", "ON").upper() in ("OFF", "0", "FALSE", "NO"):
        return "it was configured with -DWTE_PYTHON=OFF"
    found = cache.get("Python3_EXECUTABLE", "")
    if found and os.path.realpath(found) != python:
        return f"its Python is {found}, this install's is {python}"
    return ""


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def configure_args(self, build_dir, python):
        args = [
            "cmake", "-S", SOURCE_DIR, "-B", build_dir,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_TESTING=OFF",
            "-DWTE_INSTALL=OFF",
            "-DWTE_MPI=OFF",
            "-DWTE_FAULT_INJECTION=OFF",
            "-DWTE_PYTHON=ON",
            # The interpreter itself, not a venv's link to it: the same arguments from every venv
            # of one Python, so a rebuild skips the configure step (below).
            f"-DPython3_EXECUTABLE={python}",
        ]
        if shutil.which("ccache"):
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
        return args + os.environ.get("WTE_CMAKE_ARGS", "").split()

    def choose_build_dir(self, python):
        """(build directory, whether it is used as configured already)."""
        given = os.environ.get("WTE_BUILD_DIR") or os.environ.get("WTE_PYTHON_BUILD_DIR")
        if given:
            given = os.path.abspath(given)
            cache = cmake_cache(given)
            if cache is None:
                return given, False
            why = unusable(cache, python)
            if why:
                sys.exit(f"wte: WTE_BUILD_DIR={given} cannot build the module: {why}")
            say(f"reusing the build directory {given} (WTE_BUILD_DIR)")
            return given, True
        build = os.path.join(SOURCE_DIR, "build")
        cache = cmake_cache(build)
        if cache is not None:
            why = unusable(cache, python)
            if not why and cache.get("CMAKE_BUILD_TYPE", "") != "Release":
                why = f"it is a {cache.get('CMAKE_BUILD_TYPE') or 'default'} build, not Release"
            if not why:
                say(f"reusing the build directory {build} (a Release build of this tree)")
                return build, True
            say(f"not reusing {build}: {why}")
        return os.path.join(SOURCE_DIR, "build-python"), False

    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            sys.exit("wte: building the Python module needs CMake >= 3.25 (apt install cmake)")
        python = os.path.realpath(sys.executable)
        build_dir, reused = self.choose_build_dir(python)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        started = time.monotonic()
        if not reused:
            configure = self.configure_args(build_dir, python)
            # Configured before with the same arguments: `cmake --build` re-runs CMake itself if a
            # CMakeLists.txt changed, so the configure step (15 s on a busy machine) is skipped.
            stamp = os.path.join(build_dir, "wte-pip-configure.txt")
            args_text = "\n".join(configure) + "\n"
            configured = cmake_cache(build_dir) is not None and os.path.exists(stamp) and \
                open(stamp).read() == args_text
            if not configured:
                say(f"configuring {build_dir}")
                subprocess.run(configure, check=True, stdout=sys.stderr)
                with open(stamp, "w") as f:
                    f.write(args_text)
        say(f"building the target wte_python in {build_dir} with {jobs} jobs (a first build "
            "compiles wte's libraries: minutes; `pip install -v` shows the progress)")
        subprocess.run(["cmake", "--build", build_dir, "--target", "wte_python", "-j", jobs],
                       check=True, stdout=sys.stderr)
        say(f"built in {time.monotonic() - started:.0f} s")
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
