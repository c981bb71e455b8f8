"""Where each cell's per-element arithmetic is written in dynlab/ (issue 43, "one home per cell"):
code lines (docstrings and comments left out, spaces removed) that match a cell's signature,
grouped by (file, enclosing function) — the homes are ``dynlab/backends/cells.py`` (compiled
targets) and ``dynlab/backends/reference/cells.py`` with ``dynlab/activations.py`` (NumPy);
``dynlab/torch`` is torch's own definition of the cells.  A measurement, not a test: the
signatures are regular expressions, so read the rows it lists.

Signatures (regular expressions on one code line, spaces removed):

sigmoid   the logistic formula written out: 1/(1 + e) or e/(1 + e) with e an exponential,
          1/(1+exp(-z)), exp(z)/(1+exp(z)), (1+tanh(z/2))/2 (tanh(0.5 z), 0.5 + 0.5 tanh(·));
          besides, every function named *sig*/*sigmoid* is listed (definitions and aliases alike)
irnn      η(φ(z) − α s) or α s − φ(z) or φ(z) − α s or p − α y (p = φ(z)): the inner step, its
          equilibrium residual and Jacobian (diag(φ') U − α I); (φ(z) − α y) also counts as the
          CTRNN's right-hand side when divided by τ
ctrnn     (φ(z) − α y)/τ or (−α y + φ(z))/τ, or (dφ·u − α y)/τ: the rate and its tangent
gru       a GRU gate or update: (1 − z) n + z h, σ over gate slices r/z, n = φ(gi + r q)
lstm      an LSTM gate or update: f c + i g, o φ(c'), σ over gate slices i/f/o
cell      a h + γ φ(z) written out (one-line cells)

Run: python .ci/cell_homes.py [ROOT]  (ROOT: a dynlab checkout, default the current directory).
"""
from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

PHI = r"(?:phi\w*|_phi|act_scalar|dphi\w*|tanh_f64|np\.tanh|math\.tanh|xp\.tanh|torch\.tanh)"
SIG = (r"(?:sigmoid\w*|_sig|_sigmoid|torch\.sigmoid)")
PATTERNS = {
    "sigmoid": [
        r"/\((?:1(?:\.0)?|o)\+(?:e|E|[\w.]*exp\()",
        r"/\((?:e|E)\+(?:1(?:\.0)?|o)\)",
        r"exp\([^)]*\)/\(1(?:\.0)?\+",
        r"(?:np|xp|math)\.tanh\(0\.5\*",
        r"0\.5\*\(1(?:\.0)?\+(?:np|xp|math)\.tanh",
        r"0\.5\+0\.5\*\w*tanh\w*\(0\.5\*",
        r"multiply\(z,0\.5",
        r"^\w+\+=0\.5$",
    ],
    "irnn": [
        r"eta\w*(?:\[[^\]]*\])?\*\(" + PHI + r"\(.*\)-[\w.]*alpha\*",
        r"[\w.]*alpha\*\w+-" + PHI + r"\(",
        r"\*\(" + PHI + r"\(.*\)-[\w.]*alpha\*\w+\)",
        r"upd=" + PHI + r"\(.*\)-[\w.]*alpha\*",
        r"\+e\w*\*\(" + PHI + r"\(",
        r"(?:^|[^\w.]|return)p-alpha\*\w+",
        r"self\.gamma\*" + PHI + r"\(.*\)-self\.beta\*",
        r"alpha\*np\.eye\(\w+\)-" + PHI + r"\(",
        r"dphi\(.*\)\[:,None\]\*[\w.]*U-[\w.]*alpha\*np\.eye",
    ],
    "ctrnn": [
        r"\(-?[\w.]*alpha\*[\w\[\]:,]+\+" + PHI + r"\(.*\)\)/[\w.]*tau",
        r"\(" + PHI + r"\(.*\)-[\w.]*alpha\*[\w\[\]:,]+\)/[\w.]*tau",
        r"\(\w*\[?\w*\]?\*\w+-[\w.]*alpha\*\w+\)/[\w.]*tau",
        r"\(dp\*.*-[\w.]*alpha\*\w+\)/[\w.]*tau",
        r"\(p-alpha\*\w+\)/[\w.]*tau",
        r"drift\([^)]*\)/[\w.]*tau",
    ],
    "gru": [
        r"\(1(?:\.0)?-z\)\*n",
        r"\(1(?:\.0)?-z\)\*" + PHI,
        r"(?:^|[^.\w])r\w*=" + SIG + r"\(",
        r"(?:^|[^.\w])z\w*=" + SIG + r"\(",
        r"\+r\w*\*\(?gh|\+r\*q|\+r0\*q0|r\*gq",
    ],
    "lstm": [
        r"(?:^|[^.\w])(?:i|ig|i0)(?:,\w+)?=" + SIG + r"\(",
        r"(?:^|[^.\w])(?:f|fg|f0)=" + SIG + r"\(",
        r"(?:^|[^.\w])o=" + SIG + r"\(",
        r"f\w*\*c\w*(?:\[[^\]]*\])?\+i\w*\*g",
        r"o\w*\*" + PHI + r"\(\w*,?c",
    ],
    "cell": [
        r"(?:^|[^\w.]|return)a\w*\*h\w*(?:\[[^\]]*\])?\+\w*(?:gain|eta\[:,:1\])\*" + PHI,
        r"form\.a\*\w+\+form\.gain\*" + PHI,
        r"H\[t\+1\]\+=a_\*H\[t\]",
        r"(?:^|[^\w.]|return)a\*h\+gain\*p",
    ],
}
SIGDEF = re.compile(r"^def(?:\w*_)?_?sig(?:moid)?(?:_\w*)?\(")
SIGDEF_EXCLUDE = re.compile(r"^def_?sigma")


def code_lines(text: str):
    """(line number, code without comments or docstrings, spaces removed) of a Python source."""
    tree = ast.parse(text)
    doc = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                doc.update(range(body[0].lineno, body[0].end_lineno + 1))
    strip = defaultdict(list)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            strip[tok.start[0]].append(tok.start[1])
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if i in doc:
            continue
        if strip.get(i):
            line = line[:min(strip[i])]
        code = re.sub(r"\s+", "", line)
        code = code.replace("float(", "(")
        if code:
            out.append((i, code))
    return tree, out


def enclosing(tree):
    """line → innermost function name."""
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            spans.append((node.lineno, node.end_lineno, node.name))
    def find(line):
        best = None
        for lo, hi, name in spans:
            if lo <= line <= hi and (best is None or lo >= best[0]):
                best = (lo, hi, name)
        return best
    return find


def count(root: Path):
    places = defaultdict(lambda: defaultdict(list))
    for path in sorted((root / "dynlab").rglob("*.py")):
        rel = str(path.relative_to(root))
        text = path.read_text()
        tree, lines = code_lines(text)
        find = enclosing(tree)
        for i, code in lines:
            f = find(i)
            fname = f[2] if f else "<module>"
            if SIGDEF.match(code) and not SIGDEF_EXCLUDE.match(code):
                places["sigmoid-named functions"][(rel, fname)].append(i)
            for cell, pats in PATTERNS.items():
                if any(re.search(p, code) for p in pats):
                    places[cell][(rel, fname)].append(i)
    return places


def main(root="."):
    places = count(Path(root))
    for cell in list(PATTERNS) + ["sigmoid-named functions"]:
        p = places[cell]
        files = sorted({f for f, _ in p})
        print(f"{cell}: {len(files)} files, {len(p)} places")
        for (f, fn), ls in sorted(p.items()):
            print(f"    {f}:{fn}  lines {','.join(map(str, ls))}")


if __name__ == "__main__":
    main(*sys.argv[1:])
