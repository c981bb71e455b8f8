"""The README's examples, run as written: ``python docs/_ext/readme_examples.py`` remakes its pictures.

``examples(text)`` lists the README's code blocks that are examples — every ```bash block but the
set-up (the one that installs) and the docs command, and every ```python block — and ``run(blocks,
folder)`` runs them in ``folder``: each bash line starting with ``dynlab`` as a command (the
installed console script), each python block as a script.  The test suite runs them the same way
and checks what the README says they show (``tests/test_readme.py``); this script also copies the
pictures they write to ``docs/_static/readme/``, where the README shows them.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PICTURES = os.path.join(ROOT, "docs", "_static", "readme")
#: Pictures wider than this (pixels) are written at half size.
WIDE = 1400


def examples(text: str) -> list:
    """(language, code) of the README's example blocks, in order."""
    out = []
    for lang, code in re.findall(r"```(bash|python)\n(.*?)```", text, flags=re.S):
        if lang == "bash" and ("pip install" in code or ".ci/" in code):
            continue
        out.append((lang, code))
    return out


def run(blocks, folder: str, env=None) -> list:
    """Run the blocks in ``folder``; returns the completed processes (each checked: exit 0)."""
    env = dict(os.environ if env is None else env, MPLBACKEND="Agg")
    done = []
    for lang, code in blocks:
        if lang == "python":
            cmds = [[sys.executable, "-c", code]]
        else:
            cmds = [shlex.split(line) for line in code.splitlines() if line.strip().startswith("dynlab ")]
            dynlab = shutil.which("dynlab") or os.path.join(os.path.dirname(sys.executable), "dynlab")
            cmds = [[dynlab] + c[1:] for c in cmds]
        for cmd in cmds:
            r = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=900, env=env)
            if r.returncode != 0:
                raise RuntimeError(f"README example failed ({' '.join(cmd[:3])} …): {r.stderr.strip()[-2000:]}")
            done.append(r)
    return done


def halve(src: str, dst: str) -> None:
    """Write the picture ``src`` at half its size (each 2×2 block of pixels averaged) when it is
    wider than ``WIDE`` pixels: the README shows it at about a screen's width, the file stays small."""
    from matplotlib import image

    img = image.imread(src)
    if img.shape[1] <= WIDE:
        shutil.copyfile(src, dst)
        return
    h, w = (img.shape[0] // 2) * 2, (img.shape[1] // 2) * 2
    img = img[:h, :w].reshape(h // 2, 2, w // 2, 2, -1).mean(axis=(1, 3))
    image.imsave(dst, img)


def main() -> int:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        blocks = examples(fh.read())
    with tempfile.TemporaryDirectory() as folder:
        for r in run(blocks, folder):
            print(r.stdout.rstrip())
        os.makedirs(PICTURES, exist_ok=True)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".png"):
                halve(os.path.join(folder, name), os.path.join(PICTURES, name))
                print("wrote", os.path.join("docs", "_static", "readme", name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
