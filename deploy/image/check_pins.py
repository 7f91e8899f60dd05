"""Fails a build whose venv holds a distribution the lock does not pin, or at another version.

Run by pip-install.sh inside an image build: ``python check_pins.py requirements/lock.txt``. The
project's own packages (chatseek-*) and the venv's installers (pip, setuptools, wheel) are not
pinned; a local version label (torch's ``+cpu``) is not part of the comparison. With
``--finish`` it uninstalls the installers that no installed distribution requires, pip last,
and deletes the ``tests`` folders inside installed packages (numpy's alone are 8 MB).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

UNPINNED = {"pip", "setuptools", "wheel"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(lock_path: str) -> int:
    pins: dict[str, str] = {}
    with open(lock_path, encoding="utf-8") as lock:
        for line in lock:
            name, sep, version = line.strip().partition("==")
            if sep:
                pins[_norm(name)] = version
    wrong = []
    for dist in metadata.distributions():
        name = _norm(dist.metadata["Name"])
        if name in UNPINNED or name.startswith("chatseek-"):
            continue
        version = dist.version.split("+", 1)[0]
        if pins.get(name) != version:
            wrong.append(f"{name}=={dist.version} (lock: {pins.get(name, 'not pinned')})")
    if wrong:
        print("check_pins: not the locked set: " + ", ".join(sorted(wrong)), file=sys.stderr)
        return 1
    print(f"check_pins: every installed distribution is at its locked version ({lock_path})")
    return 0


def finish() -> int:
    required = {
        _norm(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0])
        for dist in metadata.distributions()
        for req in dist.requires or []
        if "extra ==" not in req
    }
    drop = sorted(n for n in UNPINNED - required - {"pip"} if _installed(n)) + ["pip"]
    print("check_pins: removing " + ", ".join(drop) + ", and the packages' own test suites")
    for site in {Path(p) for p in sys.path if p.endswith("site-packages")}:
        for tests in sorted(site.glob("*/**/tests")):
            if tests.is_dir():
                shutil.rmtree(tests)
    return subprocess.call([sys.executable, "-m", "pip", "uninstall", "-q", "-y", *drop])


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    if sys.argv[1] == "--finish":
        sys.exit(finish())
    sys.exit(main(sys.argv[1]))
