# setup.py - builds the `hive` Python package from python/hive: the C
# extension (python/hive/_hive.c) compiled together with the library's own
# sources (src/), linked to the packages hive needs (found with pkg-config).
import glob
import shlex
import subprocess

from setuptools import Extension, setup

PKGS = ["liburcu-memb", "liburcu-cds", "hwloc", "numa"]


def pkg_config(flag):
    try:
        out = subprocess.run(["pkg-config", flag] + PKGS, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"pkg-config {flag} {' '.join(PKGS)} failed ({e}); run tools/deps.sh build")
    return shlex.split(out.stdout)


cflags = pkg_config("--cflags")
libs = pkg_config("--libs")
sources = ["python/hive/_hive.c"] + sorted(
    glob.glob("src/*.c") + glob.glob("src/util/*.c") + glob.glob("src/ds/*.c") + glob.glob("src/rl/*.c"))

setup(
    packages=["hive"],
    package_dir={"": "python"},
    ext_modules=[Extension(
        "hive._hive",
        sources=sources,
        include_dirs=["include"],   # src by -iquote: its sched.h must not hide the system one
        extra_compile_args=["-std=gnu11", "-D_GNU_SOURCE", "-iquote", "src", "-pthread", "-O2"] + cflags,
        extra_link_args=["-pthread"] + libs + ["-lm"],
    )],
)
