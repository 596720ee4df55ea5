"""The Spark side's public names and the module paths users imported before the layers'
move (issue 49): ``from tidemark.spark import read_kafka`` and the rest give the owning
module's objects; an old module path still loads its module, warning with the import to
write instead."""

import importlib
import sys

import pytest

import tidemark.spark as tspark


@pytest.mark.parametrize("name", tspark.__all__)
def test_each_public_name_is_its_owning_modules_object(name):
    owner = importlib.import_module(tspark._LAZY_NAMES[name])
    assert getattr(tspark, name) is getattr(owner, name)


@pytest.mark.parametrize("old, new", sorted(tspark.MOVED_MODULES.items()))
def test_an_old_module_path_loads_the_moved_module_and_says_what_to_import(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(
        DeprecationWarning, match=f"{old} moved to {new}.*from tidemark.spark import"
    ):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_a_name_the_package_does_not_have_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'read_kafak'"):
        tspark.read_kafak  # noqa: B018
