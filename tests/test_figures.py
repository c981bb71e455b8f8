"""Every figure recipe (docs/design.md, *Figures*), in --quick mode: its claim holds on its data, the data
round-trips through NetCDF, and the picture can be redrawn from the saved file alone."""
import json
import os

import pytest

from dynlab.figures import get, recipes, run_recipe
from dynlab.figures._recipe import write_claims
from dynlab.io import read_dataset

NAMES = list(recipes())


@pytest.mark.parametrize("name", NAMES)
def test_quick_recipe_claim_holds_and_redraws_from_file(name, tmp_path):
    recipe = get(name)
    record = run_recipe(recipe, tmp_path, quick=True)
    assert record["passed"], f"{name}: claim failed on its data: {record['measured']}"
    assert record["measured"], f"{name}: a claim must report the numbers that decide it"
    assert os.path.getsize(tmp_path / f"{name}.png") > 5000
    ds = read_dataset(tmp_path / f"{name}.nc")
    again = recipe.check(ds)
    assert bool(again["passed"])
    fig = recipe.draw(ds)
    assert fig.axes, f"{name}: redraw from the file gave no axes"
    json.loads(json.dumps(record))  # claims.json must be able to hold it
    write_claims([record], tmp_path)


def test_unknown_figure_names_the_parameter():
    from dynlab.errors import ParameterError

    with pytest.raises(ParameterError, match="name"):
        get("no-such-figure")
