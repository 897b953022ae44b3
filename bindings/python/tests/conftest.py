import pytest

import varve


@pytest.fixture
def store(tmp_path):
    with varve.open(tmp_path / "data", sync="never") as s:
        yield s


@pytest.fixture
def ns(store):
    return store.namespace("test")
