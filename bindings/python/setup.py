"""Build hook for the moonlm Python package.

The package is pure Python over ctypes, but it ships the engine itself:
building the package runs `go build -buildmode=c-shared` on the repository
this folder lives in and puts libmoonlm.so inside the package, so a wheel is
self-contained and tagged for the platform (py3-none-<platform>), not "any".

Set MOONLM_PREBUILT_LIBRARY=/path/libmoonlm.so to package an already built
library instead of running Go (for packagers building on a machine without Go,
and for cross-built libraries: the wheel is tagged for the library's CPU, read
from its ELF header). MOONLM_WHEEL_PLATFORM=manylinux_2_34_x86_64 (say) sets
the platform tag; it must name that CPU. `make wheel` uses both.

An sdist made by `make wheel` carries the engine's Go source in gosrc/, so
installing it where no wheel fits builds the library with Go.
"""

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70 carries bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # older setuptools: the wheel package provides it
    from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
LIBNAME = "libmoonlm.so"
MODULE = "module github.com/moonlm/moonlm"


def _repo_root():
    """The Go module to build: gosrc/ in an sdist, else the checkout this
    folder lives in (bindings/python)."""
    for root in (HERE / "gosrc", HERE.parent.parent):
        gomod = root / "go.mod"
        if gomod.is_file() and MODULE in gomod.read_text():
            return root
    return None


# ELF e_machine values of the CPUs wheels are made for, and their wheel names.
_ELF_MACHINES = {62: "x86_64", 183: "aarch64"}


def _elf_arch(path):
    """The CPU a shared library was built for, from its ELF header."""
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[5] != 1:
        raise RuntimeError("moonlm: %s is not a little-endian ELF file" % path)
    machine = int.from_bytes(head[18:20], "little")
    if machine not in _ELF_MACHINES:
        raise RuntimeError("moonlm: %s is for ELF machine %d, not one wheels are made for" % (path, machine))
    return _ELF_MACHINES[machine]


def _build_flags(root):
    """The go build arguments every build of the library uses: capi/buildflags
    (one a line; blank lines and # comments skipped), which the Makefile and
    the Go tests read too."""
    args = []
    for line in (root / "capi" / "buildflags").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            args.append(line)
    return args


def _build_library(dest):
    prebuilt = os.environ.get("MOONLM_PREBUILT_LIBRARY")
    if prebuilt:
        shutil.copyfile(prebuilt, dest)
        return
    root = _repo_root()
    if root is None:
        raise RuntimeError(
            "moonlm: cannot build libmoonlm.so: the moonlm repository (go.mod) "
            "was not found two levels above %s; build from a checkout, or set "
            "MOONLM_PREBUILT_LIBRARY" % HERE
        )
    go = shutil.which("go")
    if go is None:
        raise RuntimeError(
            "moonlm: building libmoonlm.so needs Go on PATH (or set MOONLM_PREBUILT_LIBRARY)"
        )
    env = dict(os.environ, CGO_ENABLED="1")
    # No DT_RELR (see the Makefile's lib): a wheel made from the sdist may
    # be copied to machines with an older glibc than this one.
    cmd = [go, "build", "-buildmode=c-shared"] + _build_flags(root) + [
        "-ldflags", "-s -w -extldflags=-Wl,-soname,libmoonlm.so.0",
        "-o", str(dest), "./capi",
    ]
    subprocess.run(cmd, cwd=str(root), env=env, check=True)
    header = Path(dest).with_suffix(".h")  # go writes a header beside the library
    if header.exists():
        header.unlink()


class BuildPyWithLibrary(build_py):
    """build_py that also compiles the Go engine into the package."""

    def run(self):
        super().run()
        if self.dry_run:
            return
        # absolute: go runs in the repository root, not here
        dest = (Path(self.build_lib) / "moonlm" / LIBNAME).resolve()
        dest.parent.mkdir(parents=True, exist_ok=True)
        _build_library(dest)


class PlatformWheel(bdist_wheel):
    """Tag the wheel py3-none-<platform>: it holds a native library but no
    CPython extension, so any Python 3 on this platform can use it."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        prebuilt = os.environ.get("MOONLM_PREBUILT_LIBRARY")
        if prebuilt:  # maybe cross-built: the library's CPU, not this machine's
            plat = "linux_" + _elf_arch(prebuilt)
        wanted = os.environ.get("MOONLM_WHEEL_PLATFORM")
        if wanted:
            arch = plat.split("_", 1)[1]
            if not wanted.endswith("_" + arch):
                raise RuntimeError(
                    "moonlm: MOONLM_WHEEL_PLATFORM=%s does not match the library's CPU (%s)" % (wanted, arch)
                )
            plat = wanted
        return "py3", "none", plat


class BinaryDistribution(Distribution):
    """Holds a native library: install it as platform code (wheel root)."""

    def has_ext_modules(self):
        return True


setup(
    cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel},
    distclass=BinaryDistribution,
)
