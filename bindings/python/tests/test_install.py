"""The pip path: build a wheel from the repository (the build hook compiles
libmoonlm.so with Go), install it into a fresh folder and use it from
another interpreter with no hint where the library is."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1]


def can_build_without_isolation():
    try:
        import setuptools  # noqa: F401
        import wheel  # noqa: F401
    except ImportError:
        return False
    return True


def test_wheel_builds_installs_and_runs(tmp_path, stories_path, model):
    if shutil.which("go") is None:
        pytest.skip("Go is not on PATH: the wheel build compiles libmoonlm.so")
    dist = tmp_path / "dist"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check", "-w", str(dist)]
    if can_build_without_isolation():
        cmd.append("--no-build-isolation")  # no download of setuptools: faster, works offline
    env = {k: v for k, v in os.environ.items() if k not in ("MOONLM_LIBRARY", "MOONLM_PREBUILT_LIBRARY")}
    subprocess.run(cmd + [str(PKG)], check=True, env=env, timeout=600)
    wheels = list(dist.glob("moonlm-*.whl"))
    assert len(wheels) == 1
    whl = wheels[0]
    assert whl.name.endswith("-py3-none-linux_x86_64.whl"), whl.name
    names = zipfile.ZipFile(whl).namelist()
    assert "moonlm/libmoonlm.so" in names and "moonlm/py.typed" in names

    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--disable-pip-version-check",
         "--target", str(site), str(whl)],
        check=True,
        env=env,
        timeout=300,
    )
    script = (
        "import json, sys, moonlm\n"
        "m = moonlm.Model(sys.argv[1], n_threads=1)\n"
        "print(json.dumps([moonlm.library_path(), moonlm.__file__,"
        " m.generate('Once upon a time', max_tokens=12, temperature=0)]))\n"
    )
    run_env = dict(env, PYTHONPATH=str(site))
    out = subprocess.run(
        [sys.executable, "-c", script, stories_path],
        env=run_env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lib_path, mod_file, text = json.loads(out.stdout)
    assert Path(lib_path).resolve() == (site / "moonlm" / "libmoonlm.so").resolve()
    assert Path(mod_file).resolve().is_relative_to(site.resolve())
    assert text == model.generate("Once upon a time", max_tokens=12, temperature=0)
