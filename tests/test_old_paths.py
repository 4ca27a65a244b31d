"""Old module paths (before the package was grouped into layers) keep importing, for one
release, the module at its new path, with a DeprecationWarning that names both."""

import importlib
import sys
import warnings

import pytest

import mapsched
from mapsched._imports import MOVED


@pytest.fixture
def keep_mapsched_names():
    """Importing mapsched.validate the first time binds the module to the package's name
    ``validate``, over the function: put back what the package held."""
    held = dict(vars(mapsched))
    yield
    for name in set(vars(mapsched)) - set(held):
        delattr(mapsched, name)
    vars(mapsched).update(held)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_gives_the_new_module_and_warns(old, keep_mapsched_names):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any(old in m and MOVED[old] in m for m in messages), messages


def test_names_import_from_old_paths(keep_mapsched_names):
    with pytest.warns(DeprecationWarning, match="mapsched.scheduling.decoder"):
        sys.modules.pop("mapsched.decoder", None)
        from mapsched.decoder import as_owner, decode
    assert decode is mapsched.decode and as_owner is mapsched.model.owners.as_owner


def test_an_old_path_as_an_attribute_warns(keep_mapsched_names):
    vars(mapsched).pop("coarsen", None)
    sys.modules.pop("mapsched.coarsen", None)
    with pytest.warns(DeprecationWarning, match="mapsched.coarsen moved to mapsched.scheduling.coarsen"):
        module = mapsched.coarsen
    assert module is mapsched.scheduling.coarsen


def test_new_paths_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for new in sorted(set(MOVED.values())):
            importlib.import_module(new)


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="nope"):
        mapsched.model.nope  # noqa: B018
